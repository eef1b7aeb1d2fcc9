/* Which Neural Engine this is, from what the machine says without the framework: the
 * chip's name and the OS version from sysctl (Apple only), and the family an engine
 * subtype names. The subtype itself is asked of the loaded framework (ane_runtime.h:
 * ane_rt_device_info fills the whole record). */
#ifndef ANE_DARWIN_DEVICE_H
#define ANE_DARWIN_DEVICE_H
#include "aneforge.h"

/* What the machine says about its Neural Engine. */
typedef struct {
    char chip[128];      /* sysctl machdep.cpu.brand_string ("Apple M1 Pro"); "" where there is none */
    char model[64];      /* sysctl hw.model ("MacBookPro18,3"); "" where there is none */
    char macos[64];      /* sysctl kern.osproductversion and kern.osversion ("15.3.1 (24D70)"); "" off macOS */
    char subtype[32];    /* +[_ANEDeviceInfo aneSubType] ("h13", "h16"); "" when unknown */
    af_family_id family; /* from the subtype, else from the chip name; AF_FAMILY_DEFAULT if neither tells */
} ane_rt_device;

/* chip, model and macos from sysctl ("" off Apple); the other fields are left alone. */
void ane_device_sysctl(ane_rt_device *out);
/* The family an _ANEDeviceInfo subtype names: "h13" -> A13 ... "h16", "h17" -> A16;
 * AF_FAMILY_DEFAULT for anything else. */
af_family_id ane_rt_family_of_subtype(const char *subtype);
#endif
