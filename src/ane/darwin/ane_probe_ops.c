/* The chip probe's op step: for every row of the op table (src/ir/ops.def) a small
 * program of that one op, compiled and run through the ane backend's own path (MIL and
 * a weight file, or a bridge op's net.plist program) and compared with the CPU
 * executor on the same fp16 inputs. The engine's compiler decides, not aneforge's walls
 * (the backend's validate is skipped). Then every UNVERIFIED net.plist spelling
 * (src/netplist/bridge_spellings.def) gets the verdict of the bridge program that
 * writes it.
 *
 * Compiles are the scarce thing (the daemon allows ~119 per process, a probed chip
 * maybe fewer): MIL programs go up to GROUP ops per program, a refused group is split
 * in halves until the refused op stands alone with its own refusal, and an op whose
 * numbers are wrong inside a group is run again alone before it is called wrong. A
 * bridge op is a program of its own. About 40 compiles cover the table. */
#include "ane/darwin/ane_probe_ops.h"
#include "ane/backend.h"
#include "ane/darwin/ane_runtime.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "engine/family.h"
#include "netplist/netplist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the programs */

/* How a source's values are drawn: distinct values in [0.1, 0.9] (inside every unary
 * op's domain: log, rsqrt, asin, atanh, pow), 0/1 (select's condition), whole-number
 * ids 0..hi (embedding), the start 1 (dynamic_slice), a grid -2..2 (radius_search: no
 * distance equals the radius), values 5000.. past the 4094 a crop DMA keeps (the slice
 * at a last-axis offset shows it), or a baked constant. */
enum { D_UNIT, D_BIN, D_IDS, D_START, D_GRID, D_BIG, D_CONST };

typedef struct {
    int nsrc;
    af_shape s[PROBE_OP_MAX_IN];
    unsigned char dom[PROBE_OP_MAX_IN];
    int hi;                   /* D_IDS: the largest id */
    const char *attrs[4];     /* as `aneforge op --attr` spells them */
    int via;                  /* a leaf row: the op whose program shows it (+1; 0: the row's own) */
} op_spec;

#define SH(...) { .rank = (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), .dim = { __VA_ARGS__ } }
#define X4 SH(1, 8, 4, 16)

/* The rows a kind's program does not fit: every other row takes its kind's (kind_spec). */
static const op_spec rows[IR_OP_COUNT] = {
    [IR_OP_INPUT] = { .nsrc = 1, .s = { X4 }, .attrs = { "to=fp16" }, .via = IR_OP_CAST + 1 }, /* fed and read back */
    [IR_OP_CONST] = { .nsrc = 2, .s = { X4, X4 }, .dom = { D_UNIT, D_CONST }, .via = IR_OP_MUL + 1 }, /* a baked weight */
    [IR_OP_MATMUL_W] = { .nsrc = 2, .s = { SH(1, 1, 8, 32), SH(16, 32) }, .dom = { D_UNIT, D_CONST } },
    [IR_OP_MATMUL] = { .nsrc = 2, .s = { SH(1, 2, 8, 32), SH(1, 2, 32, 16) } },
    [IR_OP_TRANSPOSE] = { .nsrc = 1, .s = { X4 }, .attrs = { "perm=0,2,1,3" } },
    [IR_OP_RESHAPE] = { .nsrc = 1, .s = { X4 }, .attrs = { "shape=1,4,8,16" } },
    [IR_OP_SLICE_BY_SIZE] = { .nsrc = 1, .s = { SH(1, 2, 4, 16) }, .dom = { D_BIG }, .attrs = { "begin=0,1,1,3", "size=1,1,2,8" } },
    [IR_OP_CONCAT] = { .nsrc = 3, .s = { SH(1, 2, 4, 16), SH(1, 3, 4, 16), SH(1, 1, 4, 16) }, .attrs = { "axis=1" } },
    [IR_OP_SPLIT] = { .nsrc = 1, .s = { X4 }, .attrs = { "axis=1", "begin=2", "size=3" } },
    [IR_OP_GROUP_NORM] = { .nsrc = 3, .s = { SH(1, 8, 2, 8), SH(8), SH(8) }, .attrs = { "eps=0.00001", "groups=2" } },
    [IR_OP_CONV] = { .nsrc = 2, .s = { SH(1, 4, 8, 8), SH(6, 4, 3, 3) }, .dom = { D_UNIT, D_CONST }, .attrs = { "pad=1,1" } },
    [IR_OP_CONV_TRANSPOSE] = { .nsrc = 2, .s = { SH(1, 4, 5, 6), SH(4, 3, 3, 3) }, .dom = { D_UNIT, D_CONST } },
    [IR_OP_EMBEDDING] = { .nsrc = 2, .s = { SH(11, 6), SH(1, 5) }, .dom = { D_UNIT, D_IDS }, .hi = 10 },
    [IR_OP_EMBEDDING_GRAD] = { .nsrc = 2, .s = { SH(4, 6, 5), SH(4, 6) }, .dom = { D_UNIT, D_IDS }, .hi = 3, .attrs = { "vocab=7" } },
    [IR_OP_SORT] = { .nsrc = 1, .s = { SH(3, 9) }, .attrs = { "key_lane=1" } },
    [IR_OP_TOPK] = { .nsrc = 1, .s = { SH(3, 10) }, .attrs = { "k=5", "key_lane=2", "largest=1" } },
    [IR_OP_ARGMINMAX] = { .nsrc = 1, .s = { SH(1, 3, 4, 5) }, .attrs = { "channel=0", "max=1" } },
    [IR_OP_GLOBAL_ARGMINMAX] = { .nsrc = 1, .s = { SH(3, 4, 6) }, .attrs = { "axis=-1", "max=1" } },
    [IR_OP_PIXEL_SHUFFLE] = { .nsrc = 1, .s = { SH(1, 12, 3, 2) }, .attrs = { "fy=2", "fx=3" } },
    [IR_OP_PIXEL_UNSHUFFLE] = { .nsrc = 1, .s = { SH(1, 2, 6, 4) }, .attrs = { "fy=3", "fx=2" } },
    [IR_OP_CHANNEL_TO_SPACE] = { .nsrc = 1, .s = { SH(1, 12, 3, 2) }, .attrs = { "fy=2", "fx=3" } },
    [IR_OP_SPACE_TO_CHANNEL] = { .nsrc = 1, .s = { SH(1, 2, 6, 4) }, .attrs = { "fy=3", "fx=2" } },
    [IR_OP_SPACE_TO_BATCH] = { .nsrc = 1, .s = { SH(1, 3, 4, 6) }, .attrs = { "fy=2", "fx=3" } },
    [IR_OP_BATCH_TO_SPACE] = { .nsrc = 1, .s = { SH(6, 2, 3, 2) }, .attrs = { "fy=2", "fx=3" } },
    [IR_OP_CROSS_PRODUCT] = { .nsrc = 2, .s = { SH(4, 3), SH(4, 3) } },
    [IR_OP_CROSS_CORRELATION] = { .nsrc = 2, .s = { SH(5, 7), SH(2, 3) } },
    [IR_OP_COST_VOLUME] = { .nsrc = 2, .s = { SH(6), SH(10) }, .attrs = { "max_disparity=3" } },
    [IR_OP_FPS] = { .nsrc = 1, .s = { SH(40, 3) }, .attrs = { "k=7" } },
    [IR_OP_RADIUS_SEARCH] = { .nsrc = 2, .s = { SH(30, 3), SH(4, 3) }, .dom = { D_GRID, D_GRID }, .attrs = { "radius=1.5" } },
    [IR_OP_DYNAMIC_SLICE] = { .nsrc = 2, .s = { SH(3, 4), SH(1) }, .dom = { D_UNIT, D_START }, .attrs = { "axis=-1", "size=2" } },
    [IR_OP_LRN] = { .nsrc = 1, .s = { SH(1, 5, 3, 2) }, .attrs = { "alpha=0.3", "beta=0.75", "k=1" } },
    [IR_OP_MINMAX_NORM] = { .nsrc = 1, .s = { SH(1, 3, 4, 6) }, .attrs = { "axis=-1", "eps=0.01" } },
    [IR_OP_SCALED_ELEMENTWISE] = { .nsrc = 2, .s = { SH(3, 5), SH(3, 5) }, .attrs = { "op=add", "scale=0.75" } },
    [IR_OP_EINSUM] = { .nsrc = 2, .s = { SH(1, 3, 4, 5), SH(1, 5, 4, 6) } },
    [IR_OP_SDPA] = { .nsrc = 3, .s = { SH(1, 2, 6, 8), SH(1, 2, 6, 8), SH(1, 2, 6, 8) } },
    [IR_OP_FLATTEN] = { .nsrc = 1, .s = { SH(3, 4, 5) } },
    [IR_OP_DROPOUT] = { .nsrc = 1, .s = { SH(2, 3, 4) }, .attrs = { "rate=0" } },
    [IR_OP_BROADCAST] = { .nsrc = 1, .s = { SH(1, 5, 4) }, .attrs = { "axis=0", "size=3" } },
    [IR_OP_INPUT_VIEW] = { .nsrc = 1, .s = { SH(4, 6) }, .attrs = { "offset=5", "size=11" } },
};

/* A kind whose ops all take one program shape; false for a kind whose rows differ (each
 * of its ops then needs its row above, which test_ane_backend's probed case checks). */
static bool kind_spec(ir_op_kind k, int arity, op_spec *s) {
    memset(s, 0, sizeof *s);
    s->s[0] = (af_shape)X4;
    switch (k) {
    case IR_KIND_UNARY: s->nsrc = 1; return true;
    case IR_KIND_BINARY: s->nsrc = 2; s->s[1] = s->s[0]; return true;
    case IR_KIND_SELECT:
        s->nsrc = 3, s->s[1] = s->s[2] = s->s[0], s->dom[0] = D_BIN;
        return true;
    case IR_KIND_SCALAR: s->nsrc = 1, s->attrs[0] = "scalar=0.75"; return true;
    case IR_KIND_REDUCE: s->nsrc = 1, s->attrs[0] = "axes=-1", s->attrs[1] = "keep_dims=1"; return true;
    case IR_KIND_SOFTMAX: s->nsrc = 1, s->attrs[0] = "axis=-1"; return true;
    case IR_KIND_CAST: s->nsrc = 1, s->attrs[0] = "to=fp16"; return true;
    case IR_KIND_POOL:
        s->nsrc = 1, s->s[0] = (af_shape)SH(1, 4, 8, 8), s->attrs[0] = "kernel=2,2", s->attrs[1] = "stride=2,2";
        return true;
    case IR_KIND_NORM: /* x [1, 8, 2, 8]: gamma and beta [8] fit the last axis and the channels alike */
        s->nsrc = arity, s->s[0] = (af_shape)SH(1, 8, 2, 8), s->s[1] = s->s[2] = (af_shape)SH(8), s->attrs[0] = "eps=0.00001";
        return true;
    case IR_KIND_LEAF: case IR_KIND_MATMUL: case IR_KIND_LAYOUT: case IR_KIND_CONV: case IR_KIND_RANK:
    case IR_KIND_REARRANGE: case IR_KIND_GEOMETRY: case IR_KIND_BNORM: case IR_KIND_EINSUM: case IR_KIND_ATTENTION:
    case IR_KIND_STRUCTURAL: case IR_KIND_COUNT:
        return false;
    }
    return false;
}

/* Value i of n for a source: fp16-exact, distinct within the source. */
static float value(int dom, int64_t i, int64_t n, int k, int hi) {
    switch (dom) {
    case D_BIN: return (float)((i * 7 + k) % 3 != 0);
    case D_IDS: return (float)((i * 5 + 3) % (hi + 1));
    case D_START: return 1.0f;
    case D_GRID: return (float)((i * 7) % 5) - 2.0f;
    case D_BIG: return 5000.0f + 4.0f * (float)((i * 97) % n);
    default: return af_round_f16(0.1f + 0.8f * (float)((i * 97 + 31 * k) % n) / (float)n);
    }
}

void probe_op_free(probe_op_prog *p) {
    for (int k = 0; k < p->nin; k++) free(p->val[k]);
    memset(p, 0, sizeof *p);
}

af_status probe_op_build(af_graph *g, int op, probe_op_prog *p) {
    memset(p, 0, sizeof *p);
    p->op = op;
    if (ir_ops[op].flags & OPF_CPU_ONLY)
        return ir_fail(AF_ERR_UNSUPPORTED, "a CPU-only kernel with no engine form (the engine targets refuse it by name)");
    op_spec s = rows[op];
    if (!s.nsrc && !kind_spec(ir_ops[op].kind, ir_ops[op].arity, &s))
        return ir_fail(AF_ERR_INVALID, "probe: op %s has no probe program (a row in src/ane/darwin/ane_probe_ops.c)", ir_ops[op].name);
    ir_op build = s.via ? (ir_op)(s.via - 1) : (ir_op)op;
    af_tensor *src[PROBE_OP_MAX_IN] = { 0 };
    for (int k = 0; k < s.nsrc; k++) {
        int64_t n = af_shape_count(s.s[k]);
        float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
        if (!v) { probe_op_free(p); return ir_fail(AF_ERR_NOMEM, "probe: out of memory"); }
        for (int64_t i = 0; i < n; i++) v[i] = value(s.dom[k], i, n, k, s.hi);
        if (s.dom[k] == D_CONST) {
            src[k] = af_const(g, NULL, s.s[k], v);
            free(v);
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "p%d_%d", op, k);
        src[k] = af_input(g, name, AF_F16, s.s[k]);
        if (src[k] && (s.dom[k] == D_IDS || s.dom[k] == D_START)) src[k]->flags |= IR_TF_EXACT; /* as the builders mark them */
        p->in[p->nin] = src[k];
        p->val[p->nin++] = v;
    }
    ir_attrs a;
    ir_attrs_default(build, &a);
    for (int i = 0; i < 4 && s.attrs[i]; i++) {
        char key[32], err[200];
        const char *eq = strchr(s.attrs[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - s.attrs[i]), s.attrs[i]);
        if (!ir_op_attr(build, key) || !ir_attr_parse(build, key, eq + 1, &a, s.s[0].rank, err, sizeof err)) {
            probe_op_free(p);
            return ir_fail(AF_ERR_INVALID, "probe: %s's attribute %s: %s", ir_ops[op].name, s.attrs[i], err);
        }
    }
    if (build == IR_OP_SDPA && a.scalar == 0) a.scalar = 1.0f / sqrtf((float)s.s[0].dim[3]); /* as af_sdpa */
    p->out = ir_build(build, s.nsrc, src, &a);
    if (!p->out) {
        const char *e = af_graph_error(g);
        probe_op_free(p);
        return ir_fail(AF_ERR_INVALID, "probe: %s's program: %s", ir_ops[op].name, e ? e : "not built");
    }
    return AF_OK;
}

double probe_op_rel_err(const float *y, const float *ref, int64_t n) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs((double)ref[i]) > scale) scale = fabs((double)ref[i]);
    double floor_ = 1e-2 * scale + 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)y[i] - (double)ref[i]) / (fabs((double)ref[i]) + floor_);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e; /* NaN and inf count as the worst */
    }
    return worst;
}

/* ------------------------------------------------------------------ running */

enum { GROUP = 16 };

typedef struct {
    ff_doc *doc;
    af_family_id family;
    int64_t limit;            /* compiles this process may make */
    int done, total;          /* progress */
    int pass, refused, wrong, cpu_only, skipped;
    char res[IR_OP_COUNT][16]; /* each op's verdict word, for the spellings */
} ctx;

static af_status record(ctx *c, int op, const char *verdict) {
    char key[80];
    snprintf(key, sizeof key, "op.%s", ir_ops[op].name);
    snprintf(c->res[op], sizeof c->res[op], "%.*s", (int)strcspn(verdict, " :"), verdict);
    c->pass += !strncmp(verdict, "pass", 4);
    c->refused += !strncmp(verdict, "refused", 7);
    c->wrong += !strncmp(verdict, "wrong", 5);
    c->cpu_only += !strncmp(verdict, "cpu-only", 8);
    c->skipped += !strncmp(verdict, "not probed", 10);
    ir_log(AF_LOG_INFO, "probe ops [%d/%d] %s: %.120s", ++c->done, c->total, ir_ops[op].name, verdict);
    return ff_set_str(c->doc, key, verdict);
}

/* The compiler's own words, after the framework's and the backend's wrapping. */
static const char *compiler_words(const char *why) {
    const char *w = why, *f;
    while ((f = strstr(w, "FAILED: "))) w = f + 8;
    if (w == why && !strncmp(w, "compiling ", 10) && (f = strstr(w, ": "))) w = f + 2;
    return w;
}

static af_status run_unit(ctx *c, const int *ops, int n);

/* Splits a refused or failed unit, or records the lone op's refusal. */
static af_status refuse_or_split(ctx *c, const int *ops, int n, const char *stage, const char *why) {
    if (n > 1) {
        af_status st = run_unit(c, ops, n / 2);
        return st ? st : run_unit(c, ops + n / 2, n - n / 2);
    }
    char v[700];
    snprintf(v, sizeof v, "refused%s: %.600s", stage, compiler_words(why));
    return record(c, ops[0], v);
}

/* Builds, compiles and runs the programs of ops[0..n) as one program, records each. */
static af_status run_unit(ctx *c, const int *ops, int n) {
    af_graph *g = af_graph_new();
    probe_op_prog prog[GROUP];
    af_tensor *in[GROUP * PROBE_OP_MAX_IN], *out[GROUP];
    int nin = 0;
    af_status st = g ? AF_OK : ir_fail(AF_ERR_NOMEM, "probe: out of memory");
    memset(prog, 0, sizeof prog);
    for (int i = 0; i < n && !st; i++) {
        if ((st = probe_op_build(g, ops[i], &prog[i]))) break;
        for (int k = 0; k < prog[i].nin; k++) in[nin++] = prog[i].in[k];
        out[i] = prog[i].out;
    }
    compile_plan plan;
    memset(&plan, 0, sizeof plan);
    char msg[1200] = "";
    bool planned = false;
    if (!st) {
        st = plan_build(&plan, g, nin, in, n, out, msg, sizeof msg);
        if (st) ir_fail(st, "probe: planning %s's program: %s", ir_ops[ops[0]].name, msg);
        planned = !st;
    }
    /* fp16 inputs as both sides see them, and room for both sides' outputs */
    af_buffer bin[GROUP * PROBE_OP_MAX_IN], bref[GROUP], bane[GROUP];
    float *ref[GROUP] = { 0 }, *got[GROUP] = { 0 };
    for (int i = 0, j = 0; i < n && !st; i++) {
        for (int k = 0; k < prog[i].nin; k++, j++) bin[j] = AF_BUF_F32(prog[i].val[k], af_shape_count(prog[i].in[k]->shape));
        int64_t m = af_shape_count(out[i]->shape);
        ref[i] = malloc(sizeof(float) * (size_t)(m + 1));
        got[i] = malloc(sizeof(float) * (size_t)(m + 1));
        if (!ref[i] || !got[i]) st = ir_fail(AF_ERR_NOMEM, "probe: out of memory");
        else bref[i] = AF_BUF_F32(ref[i], m), bane[i] = AF_BUF_F32(got[i], m);
    }
    if (!st) { /* the CPU executor in fp32 from the same fp16 values */
        cpu_exec_opts o = { .threads = 1 };
        cpu_exec *e = NULL;
        st = cpu_exec_new(&plan, &o, &e, msg, sizeof msg);
        if (st) ir_fail(st, "%s", msg);
        else st = cpu_exec_run(e, bin, bref);
        cpu_exec_free(e);
        if (st) { /* a reference that does not run: say so per op, probe nothing */
            char v[400];
            snprintf(v, sizeof v, "not probed: the CPU reference failed: %.300s", af_error_message());
            st = AF_OK;
            for (int i = 0; i < n && !st; i++) st = record(c, ops[i], v);
            goto done;
        }
    }
    if (!st && ane_rt_compile_count() >= c->limit) {
        char v[200];
        snprintf(v, sizeof v, "not probed: the compile budget of one process (%lld) ran out; remove \"step.ops\" from the "
                 "file and run doctor --probe again to probe the rest", (long long)c->limit);
        for (int i = 0; i < n && !st; i++) st = record(c, ops[i], v);
        goto done;
    }
    if (!st) {
        backend_cfg cfg = { .target = AF_TARGET_ANE, .family = c->family, .family_asked = AF_FAMILY_DEFAULT, .fp16 = true,
                            .threads = 1, .ane_framework = ane_rt_framework() };
        af_stats stats;
        memset(&stats, 0, sizeof stats);
        void *state = NULL;
        if (ane_backend.init(&cfg, &plan, &state, &stats, msg, sizeof msg)) {
            st = refuse_or_split(c, ops, n, "", msg);
            goto done;
        }
        af_status rs = ane_backend.run(state, bin, bane, &stats);
        ane_backend.free(state);
        if (rs) {
            snprintf(msg, sizeof msg, "%s", af_error_message());
            st = refuse_or_split(c, ops, n, " at run time", msg);
            goto done;
        }
        for (int i = 0; i < n && !st; i++) {
            double e = probe_op_rel_err(got[i], ref[i], af_shape_count(out[i]->shape));
            char v[300];
            if (e <= PROBE_OP_PASS_ERR) {
                snprintf(v, sizeof v, "pass (max rel err %.2g)", e);
            } else if (n > 1) { /* wrong inside a group: alone before it is called wrong */
                st = run_unit(c, &ops[i], 1);
                continue;
            } else {
                int64_t m = af_shape_count(out[i]->shape), at = 0;
                for (int64_t k = 1; k < m; k++)
                    if (!(fabsf(got[i][k] - ref[i][k]) <= fabsf(got[i][at] - ref[i][at]))) at = k;
                snprintf(v, sizeof v, "wrong: max rel err %.3g (at %lld the engine gave %g, the CPU %g)", e, (long long)at,
                         (double)got[i][at], (double)ref[i][at]);
            }
            st = record(c, ops[i], v);
        }
    }
done:
    for (int i = 0; i < n; i++) {
        probe_op_free(&prog[i]);
        free(ref[i]);
        free(got[i]);
    }
    if (planned) plan_free(&plan);
    af_graph_free(g);
    return st;
}

/* ------------------------------------------------------------------ spellings */

/* A spelling (bridge_spellings, netplist.h) is tried by the program of every bridge op
 * whose unit writes it: accepted when they compiled and gave the CPU's numbers (a
 * misread key shows as wrong numbers or a refusal: the programs use unequal factors and
 * parameters other than the defaults), else what they got. */
static af_status judge_spellings(ctx *c, int *n_ok, int *n_tried) {
    af_status st = AF_OK;
    for (const bridge_spelling *r = bridge_spellings; r->type && !st; r++) {
        if (r->source != BRIDGE_UNVERIFIED) continue;
        char ops[300] = "", v[900], key[FF_MAX_KEY + 1];
        int nops = 0, npass = 0;
        size_t k = 0;
        const char *bad = NULL;
        for (int op = 0; op < IR_OP_COUNT; op++) {
            const bridge_unit_row *u = bridge_unit_info((ir_op)op);
            if (!u || strcmp(u->type, r->type)) continue;
            nops++;
            if (!strcmp(c->res[op], "pass")) npass++;
            else if (!bad) bad = ir_ops[op].name;
            if (k < sizeof ops) k += (size_t)snprintf(ops + k, sizeof ops - k, "%s%s", k ? ", " : "", ir_ops[op].name);
        }
        if (!nops) continue; /* a unit no bridge op writes: nothing to try it with */
        (*n_tried)++;
        if (npass == nops) {
            (*n_ok)++;
            snprintf(v, sizeof v, "accepted: the %s program%s compiled with it and matched the CPU", ops, nops > 1 ? "s" : "");
        } else {
            char okey[80];
            snprintf(okey, sizeof okey, "op.%s", bad);
            const ff_member *m = ff_get(c->doc, okey);
            snprintf(v, sizeof v, "not confirmed: %s %.700s", bad, m && m->type == FF_STR ? m->str : "was not probed");
        }
        snprintf(key, sizeof key, "spelling.%s.%s", r->type, r->field);
        st = ff_set_str(c->doc, key, v);
    }
    return st;
}

/* ------------------------------------------------------------------ the step */

/* Whether op's program builds (a new row of a kind without a shared program has none
 * until it gets its row; test_ane_backend's probed case fails on it). */
static bool buildable(int op) {
    af_graph *g = af_graph_new();
    probe_op_prog p;
    af_status st = g ? probe_op_build(g, op, &p) : ir_fail(AF_ERR_NOMEM, "probe: out of memory");
    if (!st) probe_op_free(&p);
    af_graph_free(g);
    return !st;
}

af_status probe_ops_step(ff_doc *doc, const char *path, int quick, char *res, size_t n) {
    (void)quick; /* the whole table either way: about 40 compiles */
    ctx *c = calloc(1, sizeof *c);
    if (!c) return ir_fail(AF_ERR_NOMEM, "probe: out of memory");
    c->doc = doc;
    c->total = IR_OP_COUNT;
    ane_rt_device d;
    ane_rt_device_info(&d);
    c->family = d.family == AF_FAMILY_DEFAULT ? AF_FAMILY_A16 : d.family;
    c->limit = ane_rt_compile_budget();
    const ff_member *b = ff_get(doc, "compile_budget"); /* measured by the step before: the daemon's own */
    if (b && b->type == FF_INT && b->i > 0 && b->i < c->limit) c->limit = b->i;
    int64_t compiles0 = ane_rt_compile_count();
    af_status st = AF_OK;
    int group[GROUP], ng = 0;
    for (int op = 0; op < IR_OP_COUNT && !st; op++) {
        char key[80];
        snprintf(key, sizeof key, "op.%s", ir_ops[op].name);
        const ff_member *m = ff_get(doc, key);
        if (m && m->type == FF_STR && strncmp(m->str, "not probed", 10)) { /* an earlier run's verdict stands */
            char *kept = ir_strdup(m->str); /* record replaces the member it points into */
            st = kept ? record(c, op, kept) : ir_fail(AF_ERR_NOMEM, "probe: out of memory");
            free(kept);
            continue;
        }
        if (ir_ops[op].flags & OPF_CPU_ONLY) {
            st = record(c, op, "cpu-only: a CPU kernel with no engine form; the engine targets refuse it by name");
            continue;
        }
        if (!buildable(op)) { /* a row without a program: named, and the rest goes on */
            char v[400];
            snprintf(v, sizeof v, "not probed: %.300s", af_error_message());
            st = record(c, op, v);
            continue;
        }
        if (ir_ops[op].flags & OPF_BRIDGE) { /* a net.plist program of its own */
            if (!(st = run_unit(c, &op, 1))) st = ff_write(path, doc);
            continue;
        }
        group[ng++] = op;
        if (ng == GROUP) {
            if (!(st = run_unit(c, group, ng))) st = ff_write(path, doc);
            ng = 0;
        }
    }
    if (!st && ng) st = run_unit(c, group, ng);
    int sp_ok = 0, sp_tried = 0;
    if (!st) st = judge_spellings(c, &sp_ok, &sp_tried);
    if (!st) st = ff_write(path, doc);
    char skipped[64] = "";
    if (c->skipped) snprintf(skipped, sizeof skipped, ", %d not probed", c->skipped);
    snprintf(res, n, "%d ops: %d pass, %d refused, %d wrong numbers, %d CPU-only%s; %d of %d unverified spellings accepted; "
             "%lld compiles", IR_OP_COUNT, c->pass, c->refused, c->wrong, c->cpu_only, skipped, sp_ok, sp_tried,
             (long long)(ane_rt_compile_count() - compiles0));
    free(c);
    return st;
}
