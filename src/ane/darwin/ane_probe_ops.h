/* The chip probe's op step (ane_probe_ops.c): one small program per row of the op
 * table (src/ir/ops.def), run on the engine and compared with the CPU, and the
 * unverified net.plist spellings (src/netplist/bridge_spellings.def) judged by the
 * bridge programs that write them. The program builder and the verdict are shared with
 * the tests, which run the same programs on ane-sim loaded with the probe's file. */
#ifndef ANE_DARWIN_PROBE_OPS_H
#define ANE_DARWIN_PROBE_OPS_H
#include "engine/family_file.h"
#include "ir/ir.h"

#include <stddef.h>

#define PROBE_OP_MAX_IN 4

/* One op's program inside a graph: its fed inputs with their values (fp16-exact,
 * malloc'd) and its one output. */
typedef struct {
    int op, nin;
    af_tensor *in[PROBE_OP_MAX_IN];
    float *val[PROBE_OP_MAX_IN];
    af_tensor *out;
} probe_op_prog;

/* Builds op's program into g (inputs named p<op>_<k>). AF_ERR_UNSUPPORTED for an op
 * with no engine form (OPF_CPU_ONLY), with why in the error; another status when the
 * graph refuses it (a bug: every row has a program, test_ane_backend checks). */
af_status probe_op_build(af_graph *g, int op, probe_op_prog *p);
void probe_op_free(probe_op_prog *p);

/* The largest |y - ref| / (|ref| + 1% of max |ref|) over n values (inf when y is not
 * finite where ref is); a program passes at or below PROBE_OP_PASS_ERR. */
#define PROBE_OP_PASS_ERR 2e-2
double probe_op_rel_err(const float *y, const float *ref, int64_t n);

/* The op step: records op.<name> for every row ("pass (max rel err X)", "refused:
 * <the compiler's words>", "wrong: max rel err X ...", "cpu-only: ...") and
 * spelling.<Type>.<Field> for every UNVERIFIED spelling, rewriting path after each
 * program; res gets the summary line. */
af_status probe_ops_step(ff_doc *doc, const char *path, int quick, char *res, size_t n);
#endif
