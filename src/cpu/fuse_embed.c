/* The tied embedding's gradient in place (fuse_embed.h). */
#include "cpu/fuse_embed.h"
#include "cpu/kernels.h"

#include <stdint.h>
#include <string.h>

static bool one_gemm_head(const af_tensor *t) {
    return t->dtype == AF_F32 && (t->op == IR_OP_MATMUL_W || (t->op == IR_OP_MATMUL && cpu_matmul_is_one_gemm(t)));
}

int cpu_fuse_embed_acc(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos) {
    int absorbed = 0;
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *t = p->sched[s];
        if (t->op != IR_OP_ADD || t->dtype != AF_F32 || t->nsrc != 2 || f[s].absorbed || f[s].tail >= 0 || f[s].kind)
            continue;
        int ei = t->src[0]->op == IR_OP_EMBEDDING_GRAD ? 0 : 1;
        const af_tensor *e = t->src[ei], *x = t->src[1 - ei];
        if (e->op != IR_OP_EMBEDDING_GRAD || e == x || e->dtype != AF_F32 || !one_gemm_head(x)) continue;
        if (af_shape_count(e->src[1]->shape) > INT32_MAX || t->shape.dim[0] > INT32_MAX) continue; /* int32 slots */
        int se = pos[e->id], sx = pos[x->id];
        /* x first (its product writes the sum), then e adds to it; each read by the add alone */
        if (sx < 0 || se < 0 || sx >= se || reads[e->id] != 1 || reads[x->id] != 1 || is_out[e->id] || is_out[x->id])
            continue;
        if (f[sx].absorbed || f[sx].tail >= 0 || f[sx].kind || f[se].absorbed || f[se].tail >= 0 || f[se].kind ||
            f[se].acc_into >= 0 || !ir_shape_eq(x->shape, t->shape) || !ir_shape_eq(e->shape, t->shape))
            continue;
        f[sx].tail = s; /* no bias, no ReLU: the product alone, into the add's buffer */
        f[se].acc_into = s;
        f[s].absorbed = true;
        absorbed++;
    }
    return absorbed;
}

/* The row an id selects, or -1 (k_embedding.c's rule: truncated, in [0, v), NaN none). */
static int64_t row_of(float id, int64_t v) {
    if (!(id > -1.0f && id < (float)v)) return -1;
    int64_t r = (int64_t)id;
    return r < v ? r : -1;
}

/* Scratch: a hash of row -> slot (cap int32), each slot's row (n int32), then the slots'
 * sums (n x row floats). */
static int64_t hash_cap(int64_t n) {
    int64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

int64_t cpu_embed_acc_scratch(int64_t n, int64_t row) { return hash_cap(n) + n + n * row; }

void cpu_embed_acc(const float *dy, const float *ids, int64_t n, int64_t v, int64_t row, float *out, float *scratch) {
    int64_t cap = hash_cap(n), slots = 0;
    int32_t *hash = (int32_t *)scratch, *slot_row = hash + cap;
    float *sum = scratch + cap + n;
    for (int64_t h = 0; h < cap; h++) hash[h] = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row_of(ids[i], v);
        if (r < 0) continue;
        int64_t h = (int64_t)(((uint64_t)r * 0x9E3779B97F4A7C15ull) >> 40) & (cap - 1);
        while (hash[h] >= 0 && slot_row[hash[h]] != r) h = (h + 1) & (cap - 1);
        if (hash[h] < 0) { /* the row's first id: its sum starts at 0, as the zero-filled table's */
            hash[h] = (int32_t)slots;
            slot_row[slots] = (int32_t)r;
            memset(sum + slots * row, 0, (size_t)row * sizeof *sum);
            slots++;
        }
        float *dst = sum + (int64_t)hash[h] * row;
        const float *src = dy + i * row;
        for (int64_t k = 0; k < row; k++) dst[k] += src[k];
    }
    for (int64_t q = 0; q < slots; q++) {
        float *dst = out + (int64_t)slot_row[q] * row;
        const float *src = sum + q * row;
        for (int64_t k = 0; k < row; k++) dst[k] += src[k];
    }
}
