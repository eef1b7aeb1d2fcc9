/* Which Neural Engine this is (ane_device.h): the chip's name from sysctl (Apple only),
 * and the families the engine subtypes name ("h13" on M1 ... "h16" on M4 and M5, "h17"
 * on M5 Max, per maderix PR #50), mapped to the families ane-sim models (A13 = M1, A14 =
 * M2, A15 = M3, A16 = M4/M5). */
#include "ane/darwin/ane_device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

/* "h13" -> A13, "h14" -> A14, "h15" -> A15, "h16", "h17s", ... -> A16. */
af_family_id ane_rt_family_of_subtype(const char *s) {
    if ((s[0] != 'h' && s[0] != 'H') || !isdigit((unsigned char)s[1])) return AF_FAMILY_DEFAULT;
    int gen = atoi(s + 1);
    return gen == 13 ? AF_FAMILY_A13 : gen == 14 ? AF_FAMILY_A14 : gen == 15 ? AF_FAMILY_A15 : gen >= 16 ? AF_FAMILY_A16
                                                                                                      : AF_FAMILY_DEFAULT;
}

void ane_device_sysctl(ane_rt_device *out) {
    memset(out->chip, 0, sizeof out->chip); /* sysctl leaves the last byte: the terminator */
    memset(out->model, 0, sizeof out->model);
    memset(out->macos, 0, sizeof out->macos);
#if defined(__APPLE__)
    size_t len = sizeof out->chip - 1;
    if (sysctlbyname("machdep.cpu.brand_string", out->chip, &len, NULL, 0)) out->chip[0] = 0;
    len = sizeof out->model - 1;
    if (sysctlbyname("hw.model", out->model, &len, NULL, 0)) out->model[0] = 0;
    /* The OS version decides which compile entry point works (ane_runtime.c), so the
     * probe records it beside the chip. */
    char ver[24] = "", build[24] = "";
    len = sizeof ver - 1;
    if (sysctlbyname("kern.osproductversion", ver, &len, NULL, 0)) ver[0] = 0;
    len = sizeof build - 1;
    if (sysctlbyname("kern.osversion", build, &len, NULL, 0)) build[0] = 0;
    if (ver[0]) snprintf(out->macos, sizeof out->macos, build[0] ? "%s (%s)" : "%s", ver, build);
#endif
}
