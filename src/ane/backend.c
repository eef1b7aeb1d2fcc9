/* The ane backend: a plan is lowered to MIL text and a weight file (the same emitter
 * `aneforge mil emit` uses), checked against the family's compiler walls, compiled and
 * loaded once through the private runtime (src/ane/darwin: its content-keyed cache
 * makes recompiling the same program free), and run on fp16 surfaces, one per MIL
 * argument and output in the shapes the program declares. Resident state is an output
 * surface aliased onto its input surface (or, where the runtime's state aliasing is off,
 * copied into it after each run), so it never crosses to the caller. A bridge
 * segment (a plan of one bridge node, compile/segment.h) is its net.plist program
 * instead (ane/netplist.h), compiled through the runtime's net.plist path, one port per
 * source of the node (constant sources fed from the host) and one output. */
#include "ane/backend.h"
#include "ane/darwin/ane_runtime.h"
#include "mil/mil.h"
#include "netplist/netplist.h"
#include "compile/segment.h"
#include "engine/walls.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const compile_plan *p;
    ane_rt_program *prog;
    int nports_in, nports_out;
    int *port_of_in;          /* per plan input: its MIL argument (surface) index */
    uint16_t **in16, **out16; /* per surface: the fp16 staging buffers */
    bool *is_state;           /* per plan input: bound as resident state */
    int64_t flops;
    bool bridge;              /* a net.plist program: port k is source k of the node */
    bool out_u8;              /* its output is UInt8 (RadiusSearch): the low byte of each 2-byte cell */
    /* dynamic_slice: the start is a UInt16 constant in weights.1 (seed 004), rewritten
     * and the program recompiled when a run's start differs from the bound one */
    bool dslice;
    int64_t bound_start, start_off;
    char *xml;
    size_t xml_len;
    uint8_t *w1;
    size_t w1_len;
    ane_rt_ports ports;
    int *src_input;           /* bridge, per port: the plan input feeding it, or -1 (a constant in in16) */
} ane_state;

static void ane_free(void *state) {
    ane_state *s = state;
    if (!s) return;
    if (s->prog) ane_rt_release(s->prog);
    for (int i = 0; s->in16 && i < s->nports_in; i++) free(s->in16[i]);
    for (int i = 0; s->out16 && i < s->nports_out; i++) free(s->out16[i]);
    free(s->in16);
    free(s->out16);
    free(s->port_of_in);
    free(s->is_state);
    free(s->src_input);
    free(s->xml);
    free(s->w1);
    free(s);
}

/* The ane target's family: the device's, when the framework loads and the device tells
 * (a family the caller names must be the one the machine has: ane-sim simulates the
 * others); else the named one resolved as af_family_resolve does. */
static af_status device_family(af_family_id asked, const char *framework, af_family_id *out, char *msg, size_t n) {
    if (ane_rt_open(framework)) {
        snprintf(msg, n,
                 "cannot use the Neural Engine: %s. Where there is none (Linux, a VM), simulate it with the "
                 "ane-sim target (ane-sim:m1 ... ane-sim:m5), or name a framework binary to load "
                 "(af_compile_opts.ane_framework; the CLI reads $ANEFORGE_ANE_FRAMEWORK)",
                 af_error_message());
        return AF_ERR_UNSUPPORTED;
    }
    ane_rt_device d;
    if (ane_rt_device_info(&d) != AF_OK || d.family == AF_FAMILY_DEFAULT) { /* unknown: as resolved */
        if (af_family_resolve(asked, out) == AF_OK) return AF_OK;
        snprintf(msg, n, "%s", af_error_message());
        return AF_ERR_INVALID;
    }
    if (asked != AF_FAMILY_DEFAULT && asked != d.family) {
        snprintf(msg, n, "this machine's Neural Engine is %s (subtype %s%s%s), not %s: drop the family from the target (\"ane\") "
                 "or simulate %s with ane-sim", af_family_name_of(d.family), d.subtype, d.chip[0] ? ", " : "", d.chip,
                 af_family_name_of(asked), af_family_name_of(asked));
        return AF_ERR_UNSUPPORTED;
    }
    *out = d.family;
    return AF_OK;
}

static af_status ane_configure(backend_cfg *cfg, char *msg, size_t n) {
    return device_family(cfg->family_asked, cfg->ane_framework, &cfg->family, msg, n);
}

af_status af_compile_family(const af_compile_opts *o, af_family_id *out) {
    af_compile_opts d = { 0 };
    if (!o) o = &d;
    af_family_id f = AF_FAMILY_DEFAULT;
    af_status st = AF_OK;
    char msg[512];
    if (o->target == AF_TARGET_ANE) {
        if ((st = device_family(o->family, o->ane_framework, &f, msg, sizeof msg))) return ir_fail(st, "%s", msg);
    } else if (o->target != AF_TARGET_CPU && (st = af_family_resolve(o->family, &f))) {
        return st;
    }
    if (out) *out = f;
    return AF_OK;
}

static af_status ane_validate(const backend_cfg *cfg, const compile_plan *p, char *msg, size_t n) {
    if (cfg->precision == AF_PRECISION_FP32) {
        snprintf(msg, n, "the Neural Engine computes in fp16 only; drop AF_PRECISION_FP32 or compile for AF_TARGET_CPU");
        return AF_ERR_UNSUPPORTED;
    }
    if (p->nin > ANE_RT_MAX_PORTS || p->nout > ANE_RT_MAX_PORTS) {
        snprintf(msg, n, "the program has %d inputs and %d outputs; the runtime binds at most %d of each: split it into "
                 "several programs", p->nin, p->nout, ANE_RT_MAX_PORTS);
        return AF_ERR_UNSUPPORTED;
    }
    if (p->nin == 0) { /* the framework's request validation refuses a request without inputs */
        snprintf(msg, n, "the program has no inputs, and the Neural Engine evaluates only requests with at least one input "
                 "surface: feed one of its values as an input, or compile it for AF_TARGET_CPU (its result is a constant)");
        return AF_ERR_UNSUPPORTED;
    }
    af_status st = ane_rules_validate(p, cfg->family, msg, n); /* the walls the real compiler has */
    if (st && !strncmp(msg, "ane-sim ", 8)) memmove(msg + 3, msg + 7, strlen(msg + 7) + 1); /* "ane A13 (M1): ..." */
    return st;
}

static af_status fail(ane_state *s, char *msg, size_t n, af_status st, const char *what) {
    snprintf(msg, n, "%s: %s", what, af_error_message());
    ane_free(s);
    return st;
}

/* A bridge node's net.plist program: ports are its sources (x0, x1, ...), constants fed
 * from fp16 copies made here, and its one output y. */
static af_status bridge_init(const backend_cfg *cfg, const compile_plan *p, ane_state *s, af_stats *stats, char *msg,
                             size_t n) {
    const af_tensor *t = p->sched[0];
    for (int i = 0; i < p->nout; i++)
        if (p->out[i] != t) {
            snprintf(msg, n, "a bridge program's outputs must all be its node %s", ir_ops[t->op].name);
            return AF_ERR_INVALID;
        }
    s->bridge = true;
    s->nports_in = t->nsrc;
    s->nports_out = 1;
    s->src_input = malloc(sizeof *s->src_input * (size_t)(t->nsrc + 1));
    s->in16 = calloc((size_t)t->nsrc + 1, sizeof *s->in16);
    s->out16 = calloc(2, sizeof *s->out16);
    if (!s->src_input || !s->in16 || !s->out16) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    ane_rt_ports ports = {.nin = t->nsrc, .nout = 1, .out_count = {af_shape_count(t->shape)}};
    for (int k = 0; k < t->nsrc; k++) {
        const af_tensor *x = t->src[k];
        ports.in_count[k] = af_shape_count(x->shape);
        s->src_input[k] = -1;
        for (int i = 0; i < p->nin; i++)
            if (p->in[i] == x) s->src_input[k] = i;
        if (!(s->in16[k] = malloc(sizeof(uint16_t) * (size_t)ports.in_count[k] + 1))) return AF_ERR_NOMEM;
        if (s->src_input[k] < 0) ir_f32_to_f16_array(x->data, s->in16[k], ports.in_count[k]); /* a constant */
    }
    if (!(s->out16[0] = malloc(sizeof(uint16_t) * (size_t)ports.out_count[0] + 1))) return AF_ERR_NOMEM;
    netplist_program np;
    if (!netplist_for_node(t, cfg->family, &np, msg, n)) return AF_ERR_UNSUPPORTED;
    s->out_u8 = np.units[np.nunits - 1].out_u8;
    if (t->op == IR_OP_DYNAMIC_SLICE) { /* x is the only port; the start lives in weights.1 */
        s->dslice = true;
        ports.nin = 1;
        for (int k = 0; k < np.nconsts; k++)
            if (!strcmp(np.consts[k].name, "start")) s->start_off = np.consts[k].byte_offset;
        s->bound_start = np.weights1[s->start_off] | np.weights1[s->start_off + 1] << 8;
    }
    plist_value *doc = netplist_document(&np, msg, n);
    size_t len = 0;
    char *xml = doc ? plist_write_xml(doc, &len, msg, n) : NULL;
    plist_free(doc);
    af_status st = AF_ERR_UNSUPPORTED;
    if (xml) {
        int64_t before = ane_rt_compile_count();
        st = ane_rt_compile_netplist(xml, len, np.weights0, np.weights0_len, np.weights1, np.weights1_len, &ports, &s->prog);
        if (st) snprintf(msg, n, "compiling the %s net.plist for the Neural Engine: %s", ir_ops[t->op].name, af_error_message());
        else stats->compiles += ane_rt_compile_count() - before;
    }
    if (!st && s->dslice) { /* kept to rebind the start */
        s->xml = xml, s->xml_len = len, xml = NULL;
        s->w1 = np.weights1, s->w1_len = np.weights1_len, np.weights1 = NULL;
        s->ports = ports;
    }
    free(xml);
    netplist_free(&np);
    return st;
}

static af_status ane_init(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n) {
    ane_state *s = calloc(1, sizeof *s);
    if (s && plan_has_bridge(p)) {
        s->p = p;
        s->flops = p->flops;
        af_status st = bridge_init(cfg, p, s, stats, msg, n);
        if (st) { ane_free(s); return st; }
        *state = s;
        return AF_OK;
    }
    if (!s) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    s->p = p;
    s->flops = p->flops;
    s->nports_in = p->nin;
    s->nports_out = p->nout;
    s->port_of_in = malloc(sizeof *s->port_of_in * (size_t)(p->nin + 1));
    s->is_state = calloc((size_t)p->nin + 1, sizeof *s->is_state);
    s->in16 = calloc((size_t)p->nin + 1, sizeof *s->in16);
    s->out16 = calloc((size_t)p->nout + 1, sizeof *s->out16);
    int *arg_order = malloc(sizeof *arg_order * (size_t)(p->nin + 1));
    if (!s->port_of_in || !s->is_state || !s->in16 || !s->out16 || !arg_order) {
        free(arg_order);
        snprintf(msg, n, "out of memory");
        ane_free(s);
        return AF_ERR_NOMEM;
    }
    char *text = NULL;
    size_t len = 0;
    milblob_writer *blob = NULL;
    af_status st = mil_emit_mem(p->g, p->nin, p->in, p->nout, p->out, &text, &len, &blob, arg_order);
    if (st) { free(arg_order); return fail(s, msg, n, st, "lowering to MIL"); }
    ane_rt_ports ports = { .nin = p->nin, .nout = p->nout };
    for (int k = 0; k < p->nin; k++) {
        s->port_of_in[arg_order[k]] = k;
        ports.in_count[k] = af_shape_count(p->in[arg_order[k]]->shape);
    }
    for (int i = 0; i < p->nout; i++) ports.out_count[i] = af_shape_count(p->out[i]->shape);
    free(arg_order);
    size_t wlen = 0;
    const uint8_t *w = milblob_writer_count(blob) ? milblob_bytes(blob, &wlen) : NULL;
    int64_t before = ane_rt_compile_count();
    st = ane_rt_compile(text, len, w, wlen, &ports, &s->prog);
    free(text);
    milblob_writer_free(blob);
    if (st) return fail(s, msg, n, st, "compiling for the Neural Engine");
    stats->compiles += ane_rt_compile_count() - before;
    for (int k = 0; k < p->nin; k++)
        if (!(s->in16[k] = malloc(sizeof(uint16_t) * (size_t)ports.in_count[k] + 1))) st = AF_ERR_NOMEM;
    for (int i = 0; i < p->nout; i++)
        if (!(s->out16[i] = malloc(sizeof(uint16_t) * (size_t)ports.out_count[i] + 1))) st = AF_ERR_NOMEM;
    if (st) { snprintf(msg, n, "out of memory"); ane_free(s); return st; }
    *state = s;
    return AF_OK;
}

/* dynamic_slice's start for this run (fp16 in start16), written into the weights.1
 * constant; a start other than the bound one recompiles the program with it. */
static af_status bind_start(ane_state *s, const uint16_t *start16, af_stats *stats) {
    float v;
    ir_f16_to_f32_array(start16, &v, 1);
    int64_t start = bridge_dslice_start(s->p->sched[0], v);
    if (start == s->bound_start) return AF_OK;
    s->w1[s->start_off] = (uint8_t)(start & 0xff);
    s->w1[s->start_off + 1] = (uint8_t)(start >> 8);
    ane_rt_program *np = NULL;
    int64_t before = ane_rt_compile_count();
    af_status st = ane_rt_compile_netplist(s->xml, s->xml_len, NULL, 0, s->w1, s->w1_len, &s->ports, &np);
    if (st) return st;
    stats->compiles += ane_rt_compile_count() - before;
    ane_rt_release(s->prog);
    s->prog = np;
    s->bound_start = start;
    return AF_OK;
}

/* One run is one dispatch: fed inputs go in as fp16, delivered outputs come back. */
static af_status bridge_run(ane_state *s, const af_buffer *in, af_buffer *out, af_stats *stats) {
    const compile_plan *p = s->p;
    const uint16_t *ins[ANE_RT_MAX_PORTS] = { 0 };
    uint16_t *outs[1] = { s->out16[0] };
    for (int k = 0; k < s->nports_in; k++) {
        int i = s->src_input[k];
        if (i < 0) ins[k] = s->in16[k];
        else if (in[i].dtype == AF_F16) ins[k] = in[i].data;
        else { ir_f32_to_f16_array(in[i].data, s->in16[k], in[i].count); ins[k] = s->in16[k]; }
    }
    for (int i = 0; i < p->nin; i++) stats->bytes_in += 2 * in[i].count;
    if (s->dslice) {
        af_status st = bind_start(s, ins[1], stats);
        if (st) return st;
    }
    af_status st = ane_rt_eval(s->prog, ins, outs);
    if (st) return st;
    if (s->out_u8) /* a UInt8 output: 2 bytes per cell, the low byte the value */
        for (int64_t k = 0, cells = af_shape_count(p->sched[0]->shape); k < cells; k++) {
            float v = (float)(s->out16[0][k] & 0xff);
            ir_f32_to_f16_array(&v, &s->out16[0][k], 1);
        }
    for (int i = 0; i < p->nout; i++) {
        if (!out[i].data) continue;
        if (out[i].dtype == AF_F32) ir_f16_to_f32_array(s->out16[0], out[i].data, out[i].count);
        else memcpy(out[i].data, s->out16[0], sizeof(uint16_t) * (size_t)out[i].count);
        stats->bytes_out += 2 * out[i].count;
    }
    stats->dispatches++;
    stats->engine_flops += s->flops;
    return AF_OK;
}

static af_status ane_run(void *state, const af_buffer *in, af_buffer *out, af_stats *stats) {
    ane_state *s = state;
    if (s->bridge) return bridge_run(s, in, out, stats);
    const compile_plan *p = s->p;
    const uint16_t *ins[ANE_RT_MAX_PORTS] = { 0 };
    uint16_t *outs[ANE_RT_MAX_PORTS] = { 0 };
    for (int i = 0; i < p->nin; i++) {
        int k = s->port_of_in[i];
        if (s->is_state[i]) continue; /* lives in its surface */
        if (in[i].dtype == AF_F16) ins[k] = in[i].data;
        else { ir_f32_to_f16_array(in[i].data, s->in16[k], in[i].count); ins[k] = s->in16[k]; }
        stats->bytes_in += 2 * in[i].count;
    }
    for (int i = 0; i < p->nout; i++)
        if (out[i].data) outs[i] = out[i].dtype == AF_F16 ? out[i].data : s->out16[i];
    af_status st = ane_rt_eval(s->prog, ins, outs);
    if (st) return st;
    for (int i = 0; i < p->nout; i++) {
        if (!out[i].data) continue;
        if (out[i].dtype == AF_F32) ir_f16_to_f32_array(s->out16[i], out[i].data, out[i].count);
        stats->bytes_out += 2 * out[i].count;
    }
    stats->dispatches++;
    stats->engine_flops += s->flops;
    return AF_OK;
}

static af_status ane_bind(void *state, int i, int o) {
    ane_state *s = state;
    if (s->bridge)
        return ir_fail(AF_ERR_UNSUPPORTED, "af_model_bind_state: a bridge op's net.plist program keeps no resident state; "
                       "feed the state as an input");
    af_status st = ane_rt_alias(s->prog, o, s->port_of_in[i]);
    if (!st) s->is_state[i] = true;
    return st;
}

static af_status ane_write(void *state, int i, const float *src) {
    ane_state *s = state;
    int k = s->port_of_in[i];
    ir_f32_to_f16_array(src, s->in16[k], af_shape_count(s->p->in[i]->shape));
    return ane_rt_input_io(s->prog, k, s->in16[k], 0);
}

static af_status ane_read(void *state, int i, float *dst) {
    ane_state *s = state;
    int k = s->port_of_in[i];
    af_status st = ane_rt_input_io(s->prog, k, s->in16[k], 1);
    if (!st) ir_f16_to_f32_array(s->in16[k], dst, af_shape_count(s->p->in[i]->shape));
    return st;
}

static size_t ane_bytes(const void *state) {
    const ane_state *s = state;
    size_t b = 0;
    for (int i = 0; i < s->p->nin; i++) b += 2 * (size_t)af_shape_count(s->p->in[i]->shape);
    for (int i = 0; i < s->p->nout; i++) b += 2 * (size_t)af_shape_count(s->p->out[i]->shape);
    return b;
}

/* Native CPU kernels (OPF_CPU_ONLY) have no engine form; only graphs targeted at the
 * CPU contain them. */
static const char *ane_unsupported(const backend_cfg *cfg, const af_tensor *t) {
    (void)cfg;
    return ane_node_unsupported(t);
}

const backend_iface ane_backend = {
    .name = "ane",
    .target = AF_TARGET_ANE,
    .engine = true, .fp16_by_default = true,
    .configure = ane_configure,
    .unsupported = ane_unsupported,
    .validate = ane_validate,
    .init = ane_init,
    .run = ane_run,
    .bind_state = ane_bind,
    .write_state = ane_write,
    .read_state = ane_read,
    .memory_bytes = ane_bytes,
    .free = ane_free,
};
