/* What this CPU can do, asked of the CPU itself (cpuid on x86, hwcaps on Linux arm64),
 * never guessed from its name: the GEMM and convolution kernels are chosen from it. */
#ifndef AF_CPU_FEATURES_H
#define AF_CPU_FEATURES_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool avx2, fma, avx512f, avx512vl; /* x86-64 */
    bool avx512bf16;         /* vdpbf16ps: bf16 pairs dotted into fp32 lanes */
    bool amx_bf16;           /* AMX tiles with bf16 products, enabled by the OS (XCR0) */
    bool neon;               /* arm64 Advanced SIMD */
} cpu_features;

/* For hot elementwise loops: the compiler builds the function once per x86-64 level
 * (AVX-512, AVX2+FMA, baseline) and the loader picks one for the CPU at hand (an ELF
 * ifunc), so a portable build still runs wide vectors where the CPU has them, as the
 * GEMM kernels do by hand. Elsewhere, or with AF_NO_CLONES, one baseline function. The
 * clones may round differently where the compiler contracts to FMA (vmath.h writes its
 * FMAs out), but a machine always runs the same one, so runs stay bit-reproducible.
 * Only on static functions: clang 14 gives an external function's dispatcher local
 * binding ("name.ifunc"), so calls from other files do not link; an external entry
 * point calls a static clone (gemm.c's cpu_apply_epilogue). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(AF_NO_CLONES)
#define CPU_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_VECTOR_CLONES
#endif

const cpu_features *cpu_features_get(void);
/* The features above that are present, space-separated ("avx512f avx2 fma"), or "none". */
const char *cpu_features_string(void);
/* The CPU's model name (/proc/cpuinfo, sysctl on macOS), or "unknown". */
const char *cpu_model_name(void);
/* A core's L2 cache in bytes (sysfs on Linux, sysctl on macOS; the performance cores'
 * on Apple silicon), or 1 MiB when the system does not say: the GEMM sizes its N block
 * by it. */
int64_t cpu_l2_bytes(void);
#endif
