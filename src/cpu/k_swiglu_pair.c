/* The swiglu gradient pair in one pass (fuse_swiglu.h): both of k_attention.c's loops,
 * rounding step by rounding step, with sigmoid(a)'s exp taken once. */
#include "cpu/cpu_features.h"
#include "cpu/fuse_swiglu.h"
#include "cpu/vmath.h"

#define PAR_MIN 16384

/* Finds, for each swiglu_grad node, a later one over the same sources for the other operand. */
int cpu_fuse_swiglu_pairs(const compile_plan *p, cpu_fusion *f, const int *pos) {
    int absorbed = 0; /* a requested gradient keeps its own buffer: the pair writes it there */
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *t = p->sched[s];
        if (t->op != IR_OP_SWIGLU_GRAD || t->dtype != AF_F32 || f[s].absorbed || f[s].tail >= 0 || f[s].kind)
            continue;
        for (int s2 = s + 1; s2 < p->nsched; s2++) {
            const af_tensor *u = p->sched[s2];
            if (u->op != IR_OP_SWIGLU_GRAD || u->dtype != AF_F32 || u->a.mode == t->a.mode || f[s2].absorbed ||
                f[s2].tail >= 0 || f[s2].kind || pos[u->id] != s2)
                continue;
            bool same = true;
            for (int k = 0; k < 3; k++) same &= u->src[k] == t->src[k];
            if (!same || !ir_shape_eq(u->shape, t->shape)) continue;
            f[s].kind = CPU_FUSE_SWIGLU_PAIR;
            f[s].xr[0] = u->id;
            f[s2].absorbed = true;
            absorbed++;
            break;
        }
    }
    return absorbed;
}

typedef struct {
    const float *a, *b, *g;
    float *da, *db;
} pair_ctx;

CPU_VECTOR_CLONES static void pair_range(void *ctx, int64_t i0, int64_t i1) {
    const pair_ctx *c = ctx;
    const float *a = c->a, *b = c->b, *g = c->g;
    float *da = c->da, *db = c->db;
    for (int64_t i = i0; i < i1; i++) {
        float e = 1.0f + cpu_vexpf(-a[i]);
        float s = 1.0f / e, gb = g[i] * b[i]; /* da: swiglu_da_loop's steps */
        float t = -s + 1.0f, u = a[i] * t, w = u + 1.0f, z = s * w;
        da[i] = gb * z;
        float silu = a[i] / e; /* db: swiglu_db_loop's */
        db[i] = g[i] * silu;
    }
}

void cpu_swiglu_grad_pair(cpu_pool *pool, const float *a, const float *b, const float *dy, float *da, float *db,
                          int64_t n) {
    pair_ctx c = { a, b, dy, da, db };
    cpu_pool_for(pool, n, PAR_MIN, pair_range, &c);
}
