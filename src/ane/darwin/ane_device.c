/* Which Neural Engine this is: the chip's name from sysctl (Apple only) and the
 * engine's subtype from +[_ANEDeviceInfo aneSubType] (when a framework is loaded:
 * "h13" on M1 ... "h16" on M4 and M5, "h17" on M5 Max, per maderix PR #50), mapped to
 * the families ane-sim models (A13 = M1, A14 = M2, A15 = M3, A16 = M4/M5). */
#include "ane/darwin/ane_runtime.h"
#include "ane/darwin/apple_api.h"
#include "engine/family.h"
#include "ir/ir.h"

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

static void subtype(char *buf, size_t n) {
    buf[0] = 0;
    if (!ane_rt_framework()) return;
    Class info = ane_apple.objc_getClass("_ANEDeviceInfo");
    if (!info) return;
    void *pool = ane_apple.objc_autoreleasePoolPush();
    CFTypeRef s = (CFTypeRef)ANE_MSG(id (*)(Class, SEL))(info, ane_apple.sel_registerName("aneSubType"));
    if (!s || ane_apple.CFGetTypeID(s) != ane_apple.CFStringGetTypeID() ||
        !ane_apple.CFStringGetCString((CFStringRef)s, buf, (CFIndex)n, kCFStringEncodingUTF8))
        buf[0] = 0;
    ane_apple.objc_autoreleasePoolPop(pool);
}

af_status ane_rt_device_info(ane_rt_device *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ane: ane_rt_device_info needs somewhere to write");
    memset(out, 0, sizeof *out);
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
    subtype(out->subtype, sizeof out->subtype);
    out->family = ane_rt_family_of_subtype(out->subtype);
    if (out->family == AF_FAMILY_DEFAULT) out->family = ane_family_detect(); /* the chip's name, on Apple */
    return AF_OK;
}
