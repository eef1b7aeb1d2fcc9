/* af_mil_open and friends (aneforge.h): a read MIL module behind the public API, and the
 * built-in programs. */
#include "mil/mil.h"
#include "aneforge_llama.h"

#include <stdlib.h>
#include <string.h>

struct af_mil_program {
    mil_module m;
    char *source; /* the path, for index-check messages */
};

_Static_assert(sizeof(af_llama_kernel_shape) == sizeof(lk_shape), "the public kernel shape is lk_shape");
_Static_assert(AF_MIL_SAMPLE_MAX_PORTS == sizeof(((mil_sample *)0)->in) / sizeof(af_tensor *),
               "the public sample has mil_sample's ports");

af_status af_mil_open(const char *mil_path, const char *weights_dir, const char *function, af_mil_program **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_mil_open: out is NULL");
    *out = NULL;
    if (!mil_path) return ir_fail(AF_ERR_INVALID, "af_mil_open: mil_path is NULL");
    af_mil_program *p = calloc(1, sizeof *p);
    if (!p || !(p->source = ir_strdup(mil_path))) {
        free(p);
        return ir_fail(AF_ERR_NOMEM, "af_mil_open: out of memory");
    }
    af_status st = mil_load_file(mil_path, weights_dir, function, &p->m);
    if (st) {
        free(p->source);
        free(p);
        return st;
    }
    *out = p;
    return AF_OK;
}

af_status mil_program_wrap(mil_module *m, const char *source, af_mil_program **out) {
    *out = NULL;
    af_mil_program *p = calloc(1, sizeof *p);
    if (!p || !(p->source = ir_strdup(source))) {
        free(p);
        af_graph_free(m->g);
        return ir_fail(AF_ERR_NOMEM, "out of memory");
    }
    p->m = *m;
    *out = p;
    return AF_OK;
}

void af_mil_close(af_mil_program *p) {
    if (!p) return;
    af_graph_free(p->m.g);
    free(p->source);
    free(p);
}

af_graph *af_mil_graph(const af_mil_program *p) { return p ? p->m.g : NULL; }
int af_mil_num_args(const af_mil_program *p) { return p ? p->m.nin : 0; }
int af_mil_num_results(const af_mil_program *p) { return p ? p->m.nout : 0; }

af_tensor *af_mil_arg(const af_mil_program *p, int i, const char **name, const char **dtype) {
    if (!p || i < 0 || i >= p->m.nin) return NULL;
    if (name) *name = p->m.in_names[i];
    if (dtype) *dtype = p->m.in_types[i];
    return p->m.in[i];
}

af_tensor *af_mil_result(const af_mil_program *p, int i, const char **name, const char **dtype) {
    if (!p || i < 0 || i >= p->m.nout) return NULL;
    if (name) *name = p->m.out_names[i];
    if (dtype) *dtype = p->m.out_types[i];
    return p->m.out[i];
}

int af_mil_num_index_checks(const af_mil_program *p) { return p ? p->m.nguards : 0; }

af_tensor *af_mil_index_tensor(const af_mil_program *p, int i) {
    return p && i >= 0 && i < p->m.nguards ? p->m.guards[i].idx : NULL;
}

af_status af_mil_check_indices(const af_mil_program *p, int i, const float *values) {
    if (!p || i < 0 || i >= p->m.nguards || !values)
        return ir_fail(AF_ERR_INVALID, "af_mil_check_indices: no index check %d in this program, or values is NULL", i);
    return mil_check_indices(p->source, &p->m.guards[i], values);
}

const char *af_mil_sample_name(int i) {
    int n = 0;
    while (mil_sample_names[n]) n++;
    return i >= 0 && i < n ? mil_sample_names[i] : NULL;
}

static void to_public(const mil_sample *s, af_mil_sample *out) {
    *out = (af_mil_sample){ .g = s->g, .nin = s->nin, .nout = s->nout };
    memcpy(out->in, s->in, sizeof out->in);
    memcpy(out->out, s->out, sizeof out->out);
}

af_status af_mil_sample_build(const char *name, af_mil_sample *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_mil_sample_build: out is NULL");
    mil_sample s;
    af_status st = mil_sample_build(name, &s);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    to_public(&s, out);
    return AF_OK;
}

af_status af_mil_llama_kernel(const char *kernel, const af_llama_kernel_shape *shape, af_mil_sample *out) {
    if (!out || !shape || !kernel) return ir_fail(AF_ERR_INVALID, "af_mil_llama_kernel: kernel, shape and out must not be NULL");
    lk_shape sh = { shape->dim, shape->hidden, shape->heads, shape->kv_heads, shape->seq, shape->batch, shape->vocab_block };
    mil_sample s;
    af_status st = mil_llama_kernel(kernel, &sh, &s);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    to_public(&s, out);
    return AF_OK;
}
