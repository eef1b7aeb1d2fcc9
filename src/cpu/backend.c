/* The cpu backend: the CPU executor, all of whose work is the host's. */
#include "cpu/backend.h"
#include "cpu/cpu_exec.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_bf16.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    cpu_exec *e;
    int64_t flops; /* one run's, all on the host */
} cpu_state;

static void cpu_free(void *state) {
    cpu_state *s = state;
    if (!s) return;
    cpu_exec_free(s->e);
    free(s);
}

/* bf16 needs the instructions: emulating them would be slower than fp32, and running fp32
 * under a bf16 request would hide that the numbers are not the ones asked for. */
static af_status cpu_configure(backend_cfg *cfg, char *msg, size_t n) {
    if (cfg->precision != AF_PRECISION_BF16 || cpu_gemm_bf16_best() != CPU_BF16_NONE) return AF_OK;
    snprintf(msg, n, "precision bf16 needs AMX-BF16 or AVX512-BF16 (Intel Xeon Sapphire Rapids or later, AMD Zen 4 or "
                     "later), and this CPU (%s; %s) has neither, or the OS withholds AMX's tile state; use "
                     "AF_PRECISION_FP32 (--precision fp32)", cpu_model_name(), cpu_features_string());
    return AF_ERR_UNSUPPORTED;
}

static af_status cpu_init(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n) {
    (void)stats;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    cpu_exec_opts o = { .fp16 = cfg->fp16, .threads = cfg->threads, .fuse = !cfg->fp16 };
    if (cfg->precision == AF_PRECISION_BF16) o.bf16 = cpu_gemm_bf16_best(); /* cpu_configure vouched for it */
    af_status st = cpu_exec_new(p, &o, &s->e, msg, n);
    if (st) { free(s); return st; }
    s->flops = p->flops;
    *state = s;
    return AF_OK;
}

static af_status cpu_run(void *state, const af_buffer *in, af_buffer *out, af_stats *stats) {
    cpu_state *s = state;
    stats->host_flops += s->flops;
    return cpu_exec_run(s->e, in, out);
}
static af_status cpu_bind(void *s, int i, int o) { return cpu_exec_bind_state(((cpu_state *)s)->e, i, o); }
static af_status cpu_write(void *s, int i, const float *src) { return cpu_exec_write_state(((cpu_state *)s)->e, i, src); }
static af_status cpu_read(void *s, int i, float *dst) { return cpu_exec_read_state(((cpu_state *)s)->e, i, dst); }
static size_t cpu_bytes(const void *s) { return cpu_exec_memory_bytes(((const cpu_state *)s)->e); }
static af_status cpu_track(void *s) { return cpu_exec_track_bounds(((cpu_state *)s)->e); }
static bool cpu_bound(const void *s, int i, float *b) { return cpu_exec_output_bound(((const cpu_state *)s)->e, i, b); }

const backend_iface cpu_backend = {
    .name = "cpu",
    .target = AF_TARGET_CPU,
    .configure = cpu_configure,
    .init = cpu_init,
    .run = cpu_run,
    .bind_state = cpu_bind,
    .write_state = cpu_write,
    .read_state = cpu_read,
    .memory_bytes = cpu_bytes,
    .track_bounds = cpu_track,
    .output_bound = cpu_bound,
    .free = cpu_free,
};
