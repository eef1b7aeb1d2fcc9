/* cpu_features against the kernel's own account of the CPU: on Linux x86-64 each
 * feature the kernels are chosen from must match /proc/cpuinfo's flags (the kernel
 * lists amx_tile/amx_bf16 only when it enables the tile state, as cpu_features requires
 * XCR0's tile bits). The features string names what was found. Skipped (77) elsewhere. */
#include "cpu/cpu_features.h"
#include "support/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char flags[8192];

static bool has_flag(const char *name) {
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0)) return true;
    return false;
}

int main(void) {
#if defined(__linux__) && defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        fprintf(stderr, "cpu_features: no /proc/cpuinfo: skipped\n");
        return 77;
    }
    char line[8192];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            snprintf(flags, sizeof flags, "%s", strchr(line, ':') ? strchr(line, ':') + 1 : line);
            break;
        }
    fclose(f);
    CHECK(flags[0], "a flags line in /proc/cpuinfo");
    const cpu_features *c = cpu_features_get();
    CHECK(c->avx2 == has_flag("avx2"), "avx2: cpuid %d, cpuinfo %d", c->avx2, has_flag("avx2"));
    CHECK(c->fma == has_flag("fma"), "fma: cpuid %d, cpuinfo %d", c->fma, has_flag("fma"));
    CHECK(c->avx512f == has_flag("avx512f"), "avx512f: cpuid %d, cpuinfo %d", c->avx512f, has_flag("avx512f"));
    CHECK(c->avx512bf16 == (has_flag("avx512_bf16") && has_flag("avx512f")), "avx512bf16: cpuid %d, cpuinfo %d",
          c->avx512bf16, has_flag("avx512_bf16"));
    bool amx = has_flag("amx_bf16") && has_flag("amx_tile");
    CHECK(c->amx_bf16 == amx, "amx-bf16: cpuid+xcr0 %d, cpuinfo %d", c->amx_bf16, amx);
    const char *s = cpu_features_string();
    CHECK(!c->avx512bf16 || strstr(s, "avx512bf16"), "features string '%s' names avx512bf16", s);
    CHECK(!c->amx_bf16 || strstr(s, "amx-bf16"), "features string '%s' names amx-bf16", s);
    fprintf(stderr, "cpu_features: %s\n", s);
    return check_finish("cpu_features");
#else
    fprintf(stderr, "cpu_features: checked against /proc/cpuinfo on Linux x86-64 only: skipped\n");
    return 77;
#endif
}
