/* Core ML states (iOS 18): read_state and coreml_update_state.
 *
 * A state argument is an fp16 input of the wrapped tensor's shape (mil_map_function);
 * read_state gives the state's value now, coreml_update_state makes its value the new
 * value of the state and gives it back (coremltools' dialect op, which a package holds
 * as write_state followed by read_state). Statements run in program order, so a read
 * after an update sees the update. The state's value after the last statement is one of
 * the module's results, named as the state: whoever runs the graph feeds it back as the
 * state's input on the next call, which is what Core ML's MLState keeps between
 * predictions. */
#include "mil/mil_call.h"

#include <string.h>

/* The state argument named by argument `name` (an identifier), or NULL with the error. */
static mil_sym *state_arg(call *c, const char *name) {
    const mil_arg *a = mil_find(c, name);
    if (!a) { mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument '%s'", name); return NULL; }
    mil_sym *s = a->val.kind == MIL_V_IDENT ? mil_lookup(c->M, a->val.ident) : NULL;
    if (!s || !s->state) {
        mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must name a state<tensor<...>> function argument", name);
        return NULL;
    }
    return s;
}

static bool h_read_state(call *c, int op) {
    (void)op;
    mil_sym *s = state_arg(c, "input");
    NEED(s);
    c->in_cls = mil_dtype_class(s->type.dt);
    return mil_out(c, 0, s->state_now, MIL_VC_SAME);
}

static bool h_update_state(call *c, int op) {
    (void)op;
    mil_sym *s = state_arg(c, "state");
    NEED(s);
    const mil_arg *a = mil_find(c, "value");
    if (!a) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument 'value'");
    int cls;
    af_tensor *v = mil_value_tensor(c, &a->val, a, &cls);
    NEED(v);
    mil_sym *vs = a->val.kind == MIL_V_IDENT ? mil_lookup(c->M, a->val.ident) : NULL;
    mil_dtype dt = vs ? vs->type.dt : a->val.lit->type.dt;
    bool same = dt == s->type.dt && v->shape.rank == s->type.rank;
    for (int i = 0; same && i < s->type.rank; i++) same = v->shape.dim[i] == s->type.dim[i];
    if (!same) {
        char got[120];
        ir_shape_str(v->shape, got, sizeof got);
        return mil_cfail(c, AF_ERR_SHAPE, a, "the value (%s %s) is not the state '%s''s type (Core ML's rule: the same dtype and shape)",
                         mil_dtype_name(dt), got, s->name);
    }
    s->state_now = v;
    return mil_out(c, 0, v, cls);
}

const mil_op_entry mil_ops_state[] = {
    { "read_state", h_read_state, 0 },
    { "coreml_update_state", h_update_state, 0 },
    { NULL, NULL, 0 },
};
