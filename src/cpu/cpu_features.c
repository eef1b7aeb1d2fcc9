/* CPU feature detection. x86 asks cpuid through the compiler's __builtin_cpu_supports
 * (which also checks that the OS saves the wide registers); Linux arm64 reads the
 * kernel's hwcaps; Apple arm64 always has NEON. */
#define _DEFAULT_SOURCE
#include "cpu/cpu_features.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
/* The bf16 features, from cpuid leaf 7 directly (older compilers' __builtin_cpu_supports
 * do not know them). AMX counts only when the OS saves the tile state (XCR0 bits 17-18);
 * Linux still asks each process to request it (arch_prctl) before the first tile use. */
static void detect_bf16(cpu_features *f) {
    unsigned a, b, c, d;
    if (!f->avx512f || __get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 1, a, b, c, d);
    f->avx512bf16 = (a >> 5) & 1;
    __cpuid_count(7, 0, a, b, c, d);
    bool amx = ((d >> 22) & 1) && ((d >> 24) & 1); /* AMX-BF16 and AMX-TILE */
    __cpuid(1, a, b, c, d);
    if (amx && ((c >> 27) & 1)) { /* OSXSAVE: xgetbv is allowed */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        f->amx_bf16 = ((lo >> 17) & 3) == 3;
    }
}
#endif

static cpu_features detect(void) {
    cpu_features f = { 0 };
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
#if defined(__x86_64__)
    detect_bf16(&f);
#endif
#elif defined(__aarch64__)
#if defined(__linux__)
    f.neon = (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
    f.neon = true; /* Advanced SIMD is mandatory on arm64 */
#endif
#endif
    return f;
}

const cpu_features *cpu_features_get(void) {
    /* Detection is idempotent and cheap; racing first calls compute the same value. */
    static cpu_features f;
    static volatile int done;
    if (!done) {
        f = detect();
        done = 1;
    }
    return &f;
}

const char *cpu_features_string(void) {
    static char s[96];
    const cpu_features *f = cpu_features_get();
    char buf[96] = "";
    if (f->avx512f) strcat(buf, " avx512f");
    if (f->avx512vl) strcat(buf, " avx512vl");
    if (f->avx2) strcat(buf, " avx2");
    if (f->fma) strcat(buf, " fma");
    if (f->avx512bf16) strcat(buf, " avx512bf16");
    if (f->amx_bf16) strcat(buf, " amx-bf16");
    if (f->neon) strcat(buf, " neon");
    snprintf(s, sizeof s, "%s", buf[0] ? buf + 1 : "none");
    return s;
}

const char *cpu_model_name(void) {
    static char name[128];
    if (name[0]) return name;
    snprintf(name, sizeof name, "unknown");
#if defined(__APPLE__)
    size_t n = sizeof name;
    if (sysctlbyname("machdep.cpu.brand_string", name, &n, NULL, 0) != 0) snprintf(name, sizeof name, "unknown");
#else
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return name;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        /* "model name" on x86; arm64 kernels name only the part number ("CPU part"). */
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5)) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        snprintf(name, sizeof name, "%s", v);
        break;
    }
    fclose(f);
#endif
    return name;
}

/* sysfs names the size as "2048K" (or "1M"); 0 when it cannot be read. */
static int64_t sysfs_l2(void) {
    int64_t bytes = 0;
#if defined(__linux__)
    for (int i = 0; i < 8 && !bytes; i++) {
        char path[96], text[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int level = fgets(text, sizeof text, f) ? atoi(text) : 0;
        fclose(f);
        if (level != 2) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) break;
        char unit = 0;
        long long v = 0;
        if (fgets(text, sizeof text, f) && sscanf(text, "%lld%c", &v, &unit) >= 1 && v > 0)
            bytes = v * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
        fclose(f);
    }
#endif
    return bytes;
}

int64_t cpu_l2_bytes(void) {
    static int64_t l2;
    if (l2) return l2; /* racing first calls compute the same value */
    int64_t b = 0;
#if defined(__APPLE__)
    uint64_t v = 0;
    size_t n = sizeof v;
    if (sysctlbyname("hw.perflevel0.l2cachesize", &v, &n, NULL, 0) == 0 ||
        sysctlbyname("hw.l2cachesize", &v, &n, NULL, 0) == 0)
        b = (int64_t)v;
#else
    b = sysfs_l2();
#endif
    l2 = b >= 64 * 1024 && b <= ((int64_t)1 << 30) ? b : 1024 * 1024;
    return l2;
}
