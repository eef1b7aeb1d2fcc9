/* Neural Engine families, target specs and hardware detection. The naming follows
 * ANEForge: A13 = M1, A14 = M2, A15 = M3, A16 = M4 and M5. */
#include "engine/family.h"
#include "ir/ir.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

/* crop_dma_saturates: seed 000 measured the crop-DMA saturation and the conv
 * weight-gradient ceiling on M1 (A13); ane-formats.md section 6 names M1/M2 (A13/A14)
 * for the same last-axis crop, so A14 shares it. M3 (A15) is named by no source and
 * stays clean, as seed 000 reports for M5 (A16). compile_hangs_on_large_batch: seed 000
 * reports it on M1 only (M5 is fine; M2 and M3 are not reported either way). */
static const ane_family_info families[] = {
    { AF_FAMILY_A13, "A13", "M1", 16384, 65536, 5, 13, 1, 1 },
    { AF_FAMILY_A14, "A14", "M2", 16384, 65536, 5, 15, 1, 0 },
    { AF_FAMILY_A15, "A15", "M3", 16384, 65536, 5, 15, 0, 0 },
    { AF_FAMILY_A16, "A16", "M4/M5", 65536, 65536, 5, 15, 0, 0 },
};

const ane_family_info *ane_family_info_of(af_family_id fam) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i].id == fam) return &families[i];
    return NULL;
}

static bool ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

af_status ane_family_parse(const char *s, af_family_id *out) {
    static const struct { const char *name; af_family_id id; } names[] = {
        { "m1", AF_FAMILY_A13 }, { "m2", AF_FAMILY_A14 }, { "m3", AF_FAMILY_A15 }, { "m4", AF_FAMILY_A16 },
        { "m5", AF_FAMILY_A16 }, { "a13", AF_FAMILY_A13 }, { "a14", AF_FAMILY_A14 }, { "a15", AF_FAMILY_A15 },
        { "a16", AF_FAMILY_A16 },
    };
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (ieq(s, names[i].name)) {
            if (out) *out = names[i].id;
            return AF_OK;
        }
    return ir_fail(AF_ERR_INVALID, "unknown Neural Engine family '%s'; use m1, m2, m3, m4, m5 or a13, a14, a15, a16", s ? s : "(null)");
}

af_status af_target_parse(const char *spec, af_target *t, af_family_id *fam) {
    if (!spec) return ir_fail(AF_ERR_INVALID, "af_target_parse: spec is NULL");
    char head[16];
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    af_target tt;
    af_family_id ff = AF_FAMILY_DEFAULT;
    if (n >= sizeof head) n = sizeof head - 1; /* too long to match anything */
    memcpy(head, spec, n);
    head[n] = 0;
    if (ieq(head, "cpu")) tt = AF_TARGET_CPU;
    else if (ieq(head, "ane-sim")) tt = AF_TARGET_ANE_SIM;
    else if (ieq(head, "ane")) tt = AF_TARGET_ANE;
    else return ir_fail(AF_ERR_INVALID, "unknown target '%s'; use cpu, ane-sim[:m1..m5|a13..a16] or ane[:...]", spec);
    if (colon) {
        if (tt == AF_TARGET_CPU) return ir_fail(AF_ERR_INVALID, "target '%s': the cpu target has no family; use plain 'cpu'", spec);
        if (ane_family_parse(colon + 1, &ff)) return ir_fail(AF_ERR_INVALID, "target '%s': %s", spec, af_error_message());
    }
    if (t) *t = tt;
    if (fam) *fam = ff;
    return AF_OK;
}

#if defined(__APPLE__)
/* "Apple M1 Pro" -> A13 ... "Apple M5" -> A16. */
static af_family_id family_of_brand(const char *b) {
    const char *m = strstr(b, "Apple M");
    if (!m || !isdigit((unsigned char)m[7])) return AF_FAMILY_DEFAULT;
    int gen = atoi(m + 7);
    return gen <= 1 ? AF_FAMILY_A13 : gen == 2 ? AF_FAMILY_A14 : gen == 3 ? AF_FAMILY_A15 : AF_FAMILY_A16;
}
#endif

af_family_id ane_family_detect(void) {
#if defined(__APPLE__)
    char brand[128] = { 0 };
    size_t len = sizeof brand - 1;
    if (sysctlbyname("machdep.cpu.brand_string", brand, &len, NULL, 0) == 0) return family_of_brand(brand);
#endif
    return AF_FAMILY_DEFAULT;
}

af_status af_family_resolve(af_family_id fam, af_family_id *out) {
    if (fam != AF_FAMILY_DEFAULT) {
        if (!ane_family_info_of(fam))
            return ir_fail(AF_ERR_INVALID, "unknown Neural Engine family %d; use AF_FAMILY_A13 .. AF_FAMILY_A16 or AF_FAMILY_DEFAULT", (int)fam);
        if (out) *out = fam;
        return AF_OK;
    }
    af_family_id f = ane_family_detect();
    if (f == AF_FAMILY_DEFAULT) f = AF_FAMILY_A16; /* no hardware to ask: the newest family */
    if (out) *out = f;
    return AF_OK;
}

const char *af_family_name_of(af_family_id fam) {
    af_family_id f = fam;
    if (fam == AF_FAMILY_DEFAULT && af_family_resolve(fam, &f)) return "?";
    const ane_family_info *fi = ane_family_info_of(f);
    return fi ? fi->name : "?";
}

