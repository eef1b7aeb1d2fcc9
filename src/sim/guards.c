/* The A13 conv weight-gradient loss-scale warning, the A13 large-batch compile-time
 * warning and the near-equal subtraction precision heuristic (seed 000: "warn, never
 * auto-cap"; "compile scales with batch N"; "precision-check skip"). */
#include "sim/guards.h"
#include "ane/cost.h"
#include "engine/family.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int conv_warned;
static atomic_llong precision_flags;

int ane_guard_conv_loss_scale(af_family_id fam, int nparams, af_tensor *const *params, float loss_scale) {
    af_family_id f;
    if (af_family_resolve(fam, &f) != AF_OK) return 0;
    const ane_family_info *fi = ane_family_info_of(f);
    if (!fi || !fi->crop_dma_saturates || !(loss_scale > AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX) || !params) return 0;
    const af_tensor *conv = NULL;
    for (int i = 0; i < nparams && !conv; i++)
        if (params[i] && (params[i]->flags & IR_TF_CONV) && params[i]->a.kernel[1] > 1) conv = params[i];
    if (!conv) return 0;
    if (atomic_exchange(&conv_warned, 1) == 0)
        ir_log(AF_LOG_WARN,
                "loss_scale %g on %s (%s) with conv weight '%s' (kernel width %d): the weight gradient passes "
                "width-offset slices, which on this family saturate |v| > 4094 to inf (crop DMA). A synthetic 0.5*sum(y^2) "
                "repro breaks at loss_scale >= 512; normalized networks rarely get there. If gradients turn non-finite, lower "
                "loss_scale to <= %g or train on A16 (M4/M5). loss_scale is left unchanged.",
                (double)loss_scale, fi->name, fi->chips, af_tensor_name(conv), conv->a.kernel[1],
                (double)AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX);
    return 1;
}

int ane_guard_warnings(void) { return atomic_load(&conv_warned); }

static atomic_int compile_warned;
static atomic_llong compile_flags;

int ane_guard_compile_time(const compile_plan *m, af_family_id family) {
    const ane_family_info *fi = m ? ane_family_info_of(family) : NULL;
    if (!fi || !fi->compile_hangs_on_large_batch) return 0;
    double us = ane_compile_estimate_us(family, m);
    if (us < AF_ANE_COMPILE_WARN_US) return 0;
    atomic_fetch_add(&compile_flags, 1);
    if (atomic_exchange(&compile_warned, 1) == 0) {
        const af_tensor *big;
        int64_t n = ane_program_largest_tensor(m, &big);
        char shape[100];
        ir_shape_str(big->shape, shape, sizeof shape);
        ir_log(AF_LOG_WARN,
                "compiling for %s (%s) a program whose largest tensor, %s %s, holds %.1fM elements (batch %lld): "
                "compile time grows with the batch, and on this family a full batch near 1000 over 28x28 can take minutes or hang "
                "the compiler (estimated %.0f s here; M4/M5 compile it in seconds). Train in mini-batches (e.g. batch <= 128). "
                "Reported once per process.",
                fi->name, fi->chips, ir_ops[big->op].name, shape, (double)n / 1e6, (long long)big->shape.dim[0], us / 1e6);
    }
    return 1;
}

int64_t ane_compile_time_flags(void) { return (int64_t)atomic_load(&compile_flags); }

int64_t af_ane_precision_flags(void) { return (int64_t)atomic_load(&precision_flags); }

/* Fewer than 4 of fp16's 11 significant bits survive |a - b| < max(|a|, |b|) / 128. */
#define CANCEL_RATIO (1.0f / 128.0f)
#define F16_MIN_NORMAL 6.103515625e-05f

/* Flags a user's subtraction when at least a quarter of its elements cancel
 * catastrophically. Exact zeros (t - t, a deliberate construction) do not count. The
 * library's own vouched kernels (IR_TF_VOUCHED) never get the quirk bit. */
bool ane_precision_check(const af_tensor *t, const float *const *ins) {
    af_shape os = t->shape;
    int r = os.rank;
    int64_t st[2][AF_MAX_RANK], idx[AF_MAX_RANK] = { 0 }, off[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        af_shape xs = t->src[k]->shape;
        int64_t xst[AF_MAX_RANK];
        ir_strides(xs, xst);
        for (int d = 0; d < r; d++) {
            int j = d - (r - xs.rank);
            st[k][d] = (j < 0 || xs.dim[j] == 1) ? 0 : xst[j];
        }
    }
    int64_t n = af_shape_count(os), cancel = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = ins[0][off[0]], b = ins[1][off[1]];
        float mx = fmaxf(fabsf(a), fabsf(b));
        if (a != b && isfinite(a) && isfinite(b) && mx >= F16_MIN_NORMAL && fabsf(a - b) < mx * CANCEL_RATIO) cancel++;
        for (int d = r - 1; d >= 0; d--) {
            off[0] += st[0][d];
            off[1] += st[1][d];
            if (++idx[d] < os.dim[d]) break;
            off[0] -= st[0][d] * os.dim[d];
            off[1] -= st[1][d] * os.dim[d];
            idx[d] = 0;
        }
    }
    if (cancel == 0 || cancel * 4 < n) return false;
    atomic_fetch_add(&precision_flags, 1);
    char shape[100];
    ir_shape_str(os, shape, sizeof shape);
    const char *nm = af_tensor_name(t);
    ir_log(AF_LOG_WARN,
            "precision check: sub %s%s%s(node %d) %s subtracts near-equal values (%lld of %lld elements keep fewer than 4 of "
            "fp16's 11 significant bits). Form the difference before it is rounded to fp16 (on the host, or from the quantities "
            "it is computed from), or rescale; ignore if intended. Reported once for this node.",
            *nm ? "'" : "", nm, *nm ? "' " : "", t->id, shape, (long long)cancel, (long long)n);
    return true;
}
