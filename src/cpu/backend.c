/* The cpu backend: the CPU executor, all of whose work is the host's. */
#include "cpu/backend.h"
#include "cpu/cpu_exec.h"
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

static af_status cpu_init(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n) {
    (void)stats;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    cpu_exec_opts o = { .fp16 = cfg->fp16, .threads = cfg->threads, .fuse = !cfg->fp16 };
    if (cfg->precision == AF_PRECISION_BF16) {
        o.bf16 = cpu_gemm_bf16_best();
        if (!o.bf16)
            ir_log(AF_LOG_WARN, "precision bf16: this CPU has neither AMX-BF16 nor AVX512-BF16 (or the OS withholds "
                                "AMX), so matmuls and convolutions run in fp32; ask for fp32 to silence this note");
    }
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
