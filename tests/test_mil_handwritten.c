/* MIL goldens written by hand, not by the emitter (tests/golden/handwritten/, see its
 * README): op names, argument names, types, shapes, literal values and the pad/stride
 * layouts come from the MIL reference (ane-formats.md section 2 and coremltools' op
 * definitions), so the emitter is checked against text it did not produce.
 *   1. The emitter's output for the same graph must equal the golden modulo variable
 *      names (alpha-renaming: every name the program defines is replaced by its order
 *      of definition) and whitespace. Statement order follows the emitter's documented
 *      convention (mil_emit.c: ops depth-first from the outputs, a constant just before
 *      its first use, an op's literal parameters just before it, arguments sorted).
 *   2. The reader must parse the golden and run it to the numbers of a naive double
 *      reference (inputs rounded to fp16 first, fp16 storage tolerance).
 * tests/golden/handwritten/reader/ holds spellings the emitter never writes (ios16
 * program(1.0), decimal floats, `linear` with a bias, conv with defaults): step 2 only. */
#include "aneforge.h"
#include "mil/mil.h"
#include "support/check.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

/* The constants written into the goldens (all exact in fp16). */
static const float W[6] = { 0.5f, -1.0f, 1.5f, 0.25f, 2.0f, -0.125f }; /* [2, 3] */
static const float B[2] = { 0.5f, -0.75f };
static const float CW[8] = { 1.0f, -0.5f, 0.25f, 1.5f, -1.0f, 2.0f, 0.0f, 0.125f }; /* [2, 1, 2, 2] */

/* ---------------------------------------------------------------- naive references */

static void ref_linear(const float *x, double *y, int bias) {
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double s = bias ? B[j] : 0;
            for (int k = 0; k < 3; k++) s += (double)x[i * 3 + k] * W[j * 3 + k];
            y[i * 2 + j] = s;
        }
}
static void ref_linear_bias(const float *x, double *y) { ref_linear(x, y, 1); }
static void ref_linear_nobias(const float *x, double *y) { ref_linear(x, y, 0); }

static void ref_relu(const float *x, double *y) {
    for (int i = 0; i < 8; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

static void ref_softmax(const float *x, double *y) {
    for (int r = 0; r < 2; r++) {
        double mx = x[r * 5], s = 0;
        for (int c = 1; c < 5; c++) mx = x[r * 5 + c] > mx ? x[r * 5 + c] : mx;
        for (int c = 0; c < 5; c++) s += exp(x[r * 5 + c] - mx);
        for (int c = 0; c < 5; c++) y[r * 5 + c] = exp(x[r * 5 + c] - mx) / s;
    }
}

/* Cross-correlation of x [1, 1, 4, 4] with CW [2, 1, 2, 2]: zero pad ph rows above and
 * below and pw columns left and right, strides sh, sw. */
static void ref_conv(const float *x, double *y, int ph, int pw, int sh, int sw) {
    int ho = (4 + 2 * ph - 2) / sh + 1, wo = (4 + 2 * pw - 2) / sw + 1;
    for (int co = 0; co < 2; co++)
        for (int i = 0; i < ho; i++)
            for (int j = 0; j < wo; j++) {
                double s = 0;
                for (int u = 0; u < 2; u++)
                    for (int v = 0; v < 2; v++) {
                        int r = i * sh + u - ph, c = j * sw + v - pw;
                        if (r >= 0 && r < 4 && c >= 0 && c < 4) s += (double)x[r * 4 + c] * CW[co * 4 + u * 2 + v];
                    }
                y[(co * ho + i) * wo + j] = s;
            }
}
static void ref_conv_pad_stride(const float *x, double *y) { ref_conv(x, y, 1, 0, 1, 2); }
static void ref_conv_valid(const float *x, double *y) { ref_conv(x, y, 0, 0, 1, 1); }

static void ref_reduce_sum(const float *x, double *y) { /* [2, 3, 4] over axis 1 */
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) {
            double s = 0;
            for (int b = 0; b < 3; b++) s += x[(a * 3 + b) * 4 + c];
            y[a * 4 + c] = s;
        }
}

static void ref_reduce_mean(const float *x, double *y) { /* [2, 3, 4] over axes 0, 2 */
    for (int b = 0; b < 3; b++) {
        double s = 0;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 4; c++) s += x[(a * 3 + b) * 4 + c];
        y[b] = s / 8;
    }
}

/* ---------------------------------------------------------------- the graphs */

static af_tensor *g_linear(af_graph *g, af_tensor *x) {
    return af_linear(x, af_const(g, "w", AF_SHAPE(2, 3), W), af_const(g, "b", AF_SHAPE(2), B));
}
static af_tensor *g_matmul_w(af_graph *g, af_tensor *x) { return af_matmul_w(x, af_const(g, "wt", AF_SHAPE(2, 3), W)); }
static af_tensor *g_relu(af_graph *g, af_tensor *x) { (void)g; return af_relu(x); }
static af_tensor *g_softmax(af_graph *g, af_tensor *x) { (void)g; return af_softmax(x, 1); }
static af_tensor *g_conv(af_graph *g, af_tensor *x) {
    int stride[2] = { 1, 2 }, pad[2] = { 1, 0 };
    return af_conv(x, af_const(g, "w", AF_SHAPE(2, 1, 2, 2), CW), stride, pad, NULL, 1);
}
static af_tensor *g_reduce_sum(af_graph *g, af_tensor *x) { (void)g; int ax[1] = { 1 }; return af_reduce_sum(x, 1, ax, 0); }
static af_tensor *g_reduce_mean(af_graph *g, af_tensor *x) { (void)g; int ax[2] = { 0, 2 }; return af_reduce_mean(x, 2, ax, 1); }

typedef struct {
    const char *file;                                /* under tests/golden/handwritten/ */
    af_tensor *(*build)(af_graph *g, af_tensor *x);  /* NULL: a reader-only golden */
    af_shape x, y;
    void (*ref)(const float *x, double *y);
} hand_case;

/* ---------------------------------------------------------------- alpha-renaming */

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

typedef struct { char *name[64]; int n; } defs;

static int def_index(const defs *d, const char *s, size_t n) {
    for (int i = 0; i < d->n; i++)
        if (strlen(d->name[i]) == n && !memcmp(d->name[i], s, n)) return i;
    return -1;
}
static void def_add(defs *d, const char *s, size_t n) {
    if (d->n < 64 && def_index(d, s, n) < 0) {
        d->name[d->n] = calloc(n + 1, 1);
        memcpy(d->name[d->n++], s, n);
    }
}

/* The names a program defines, in order: function arguments (an identifier after a
 * type's closing '>' and before ',' or ')'), then each statement's result (the
 * identifier before the line's first " = "). */
static void collect_defs(const char *t, defs *d) {
    for (const char *line = t; *line; ) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *p = line;
        while (p < line + len && isspace((unsigned char)*p)) p++;
        if (!strncmp(p, "func ", 5)) {
            for (const char *q = p; q < line + len; q++)
                if (q[0] == '>' && q[1] == ' ' && ident_start(q[2])) {
                    const char *s = q + 2, *e = s;
                    while (ident_char(*e)) e++;
                    if (*e == ',' || *e == ')') def_add(d, s, (size_t)(e - s));
                }
        } else {
            const char *eq = strstr(p, " = ");
            if (eq && eq < line + len && (!strncmp(p, "tensor<", 7) || ident_start(*p))) {
                const char *s = eq;
                while (s > p && ident_char(s[-1])) s--;
                if (s > p && s[-1] == ' ') def_add(d, s, (size_t)(eq - s));
            }
        }
        line += len + (end ? 1 : 0);
    }
}

/* t with every defined name replaced by %index (argument and attribute names such as
 * `x =` inside a call stay), indentation dropped and other whitespace runs made one
 * space. */
static char *canonical(const char *t) {
    defs d = { .n = 0 };
    collect_defs(t, &d);
    size_t cap = strlen(t) * 2 + 16, k = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    bool in_call = false; /* a '(' came earlier on this line */
    for (const char *p = t; *p; ) {
        if (isspace((unsigned char)*p)) {
            bool nl = false;
            while (isspace((unsigned char)*p)) nl |= *p++ == '\n';
            if (nl) in_call = false;
            if (k && out[k - 1] != '\n') out[k++] = nl ? '\n' : ' ';
            continue;
        }
        if (isdigit((unsigned char)*p)) { /* numbers, hex floats included, pass through */
            while (ident_char(*p) || *p == '.' || ((*p == '+' || *p == '-') && (p[-1] == 'p' || p[-1] == 'e'))) out[k++] = *p++;
            continue;
        }
        if (ident_start(*p)) {
            const char *s = p;
            while (ident_char(*p)) p++;
            const char *q = p;
            while (*q == ' ') q++;
            bool arg_name = in_call && q[0] == '=' && q[1] != '=';
            int i = arg_name ? -1 : def_index(&d, s, (size_t)(p - s));
            if (i >= 0) k += (size_t)sprintf(out + k, "%%%d", i);
            else {
                memcpy(out + k, s, (size_t)(p - s));
                k += (size_t)(p - s);
            }
            continue;
        }
        if (*p == '(') in_call = true;
        out[k++] = *p++;
    }
    out[k] = 0;
    for (int i = 0; i < d.n; i++) free(d.name[i]);
    return out;
}

/* ---------------------------------------------------------------- the checks */

static char *slurp(const char *file, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/handwritten/%s", AF_SOURCE_DIR, file);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot read %s", path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[len] = 0; *n = (size_t)len; }
    return b;
}

/* The first line where a and b differ, copied into line (for the message). */
static int first_diff(const char *a, const char *b, char *line, size_t n) {
    int no = 1;
    const char *ls = a;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n') { no++; ls = a + 1; }
    const char *le = strchr(ls, '\n');
    size_t len = le ? (size_t)(le - ls) : strlen(ls);
    snprintf(line, n, "%.*s", (int)(len < n - 1 ? len : n - 1), ls);
    return no;
}

/* 1. The emitter writes the golden, modulo names and whitespace. */
static void check_emitter(const hand_case *c, const char *golden) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, c->x);
    af_tensor *y = c->build(g, x);
    CHECK(y != NULL, "%s: building the graph: %s", c->file, af_graph_error(g));
    char *text = NULL;
    size_t len = 0;
    milblob_writer *w = NULL;
    af_status st = y ? mil_emit_mem(g, 1, &x, 1, &y, &text, &len, &w, NULL) : AF_ERR_INVALID;
    CHECK(st == AF_OK, "%s: emit: %s", c->file, af_error_message());
    if (st == AF_OK) {
        size_t nb = 0;
        milblob_bytes(w, &nb);
        CHECK(milblob_writer_count(w) == 0, "%s: every constant is small enough to be inline, yet %zu weight bytes were written", c->file, nb);
        char *want = canonical(golden), *got = canonical(text), line[400];
        bool same = want && got && !strcmp(want, got);
        int at = same ? 0 : first_diff(want ? want : "", got ? got : "", line, sizeof line);
        CHECK(same, "%s: the emitter's MIL differs from the handwritten golden at statement line %d (golden, renamed: %s)\n--- emitted:\n%s",
              c->file, at, line, text);
        free(want);
        free(got);
    }
    free(text);
    milblob_writer_free(w);
    af_graph_free(g);
}

/* 2. The reader parses the golden and computes the reference's numbers. */
static void check_reader(const hand_case *c, const char *golden, size_t len) {
    mil_read_opts ro = { .source_name = c->file };
    mil_module m;
    af_status st = mil_parse(golden, len, &ro, &m);
    CHECK(st == AF_OK, "%s: parse: %s", c->file, af_error_message());
    if (st) return;
    CHECK(m.nin == 1 && m.nout == 1, "%s: %d arguments, %d results; want 1 and 1", c->file, m.nin, m.nout);
    int64_t nx = af_shape_count(c->x), ny = af_shape_count(c->y);
    bool shapes = m.nin == 1 && m.nout == 1 && af_shape_count(af_tensor_shape(m.in[0])) == nx &&
                  af_shape_count(af_tensor_shape(m.out[0])) == ny && af_tensor_shape(m.out[0]).rank == c->y.rank;
    for (int i = 0; shapes && i < c->y.rank; i++) shapes = af_tensor_shape(m.out[0]).dim[i] == c->y.dim[i];
    CHECK(shapes, "%s: the parsed program's argument or result shape is not the golden's", c->file);
    if (shapes) {
        float *x = malloc(sizeof(float) * (size_t)nx), *y = malloc(sizeof(float) * (size_t)ny);
        double *want = malloc(sizeof(double) * (size_t)ny);
        test_rng r = { 77 };
        for (int64_t i = 0; i < nx; i++) x[i] = af_round_f16((float)(4 * test_uniform(&r) - 2));
        c->ref(x, want);
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
        af_model *mod = af_compile(m.g, 1, m.in, 1, m.out, &o);
        CHECK(mod != NULL, "%s: compile: %s", c->file, af_error_message());
        af_buffer bi = AF_BUF_F32(x, nx), bo = AF_BUF_F32(y, ny);
        st = mod ? af_run(mod, &bi, &bo) : AF_ERR_INVALID;
        CHECK(st == AF_OK, "%s: run: %s", c->file, af_error_message());
        for (int64_t i = 0; st == AF_OK && i < ny; i++)
            CHECK(fabs(y[i] - want[i]) <= 2e-3 * (1 + fabs(want[i])), "%s: result %lld is %.6g, the reference says %.6g", c->file,
                  (long long)i, (double)y[i], want[i]);
        af_model_free(mod);
        free(x);
        free(y);
        free(want);
    }
    af_graph_free(m.g);
}

int main(void) {
    const hand_case cases[] = {
        { "linear.mil", g_linear, AF_SHAPE(2, 3), AF_SHAPE(2, 2), ref_linear_bias },
        { "matmul_w.mil", g_matmul_w, AF_SHAPE(2, 3), AF_SHAPE(2, 2), ref_linear_nobias },
        { "relu.mil", g_relu, AF_SHAPE(2, 4), AF_SHAPE(2, 4), ref_relu },
        { "softmax.mil", g_softmax, AF_SHAPE(2, 5), AF_SHAPE(2, 5), ref_softmax },
        { "conv.mil", g_conv, AF_SHAPE(1, 1, 4, 4), AF_SHAPE(1, 2, 5, 2), ref_conv_pad_stride },
        { "reduce_sum.mil", g_reduce_sum, AF_SHAPE(2, 3, 4), AF_SHAPE(2, 4), ref_reduce_sum },
        { "reduce_mean.mil", g_reduce_mean, AF_SHAPE(2, 3, 4), AF_SHAPE(1, 3, 1), ref_reduce_mean },
        { "reader/linear_ios16.mil", NULL, AF_SHAPE(2, 3), AF_SHAPE(2, 2), ref_linear_bias },
        { "reader/conv_valid_default.mil", NULL, AF_SHAPE(1, 1, 4, 4), AF_SHAPE(1, 2, 3, 3), ref_conv_valid },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0;
        char *golden = slurp(cases[i].file, &len);
        if (!golden) continue;
        if (cases[i].build) check_emitter(&cases[i], golden);
        check_reader(&cases[i], golden, len);
        free(golden);
    }
    return check_finish("mil_handwritten");
}
