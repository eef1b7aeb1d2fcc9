/* net.plist programs against golden files typed by hand from the format notes
 * (ane-formats.md §5; tests/golden/netplist), not produced by the writer: the writer
 * must reproduce them byte for byte. Also: a document reads back to the same program,
 * and malformed programs are refused with messages. */
#include "netplist/netplist.h"
#include "ir/fp16.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* Writes p's document, compares it with the golden file, and reads the document back. */
static void check_program(const char *golden_name, const netplist_program *p) {
    char rel[1024], err[256] = "";
    snprintf(rel, sizeof rel, "%s/tests/golden/netplist/%s.plist", AF_SOURCE_DIR, golden_name);
    size_t glen = 0, len = 0;
    char *golden = test_read_file(rel, &glen);
    plist_value *doc = netplist_document(p, err, sizeof err);
    CHECK(doc != NULL, "%s: %s", golden_name, err);
    char *xml = doc ? plist_write_xml(doc, &len, err, sizeof err) : NULL;
    CHECK(golden && xml, "%s: golden %p, writer %s", golden_name, (void *)golden, err);
    if (golden && xml) {
        size_t at = 0;
        while (at < len && at < glen && golden[at] == xml[at]) at++;
        CHECK(len == glen && at == len, "%s differs from the hand-written golden at byte %zu:\n--- golden\n%.120s\n--- ours\n%.120s",
              golden_name, at, golden + (at > 40 ? at - 40 : 0), xml + (at > 40 ? at - 40 : 0));
    }
    /* read back: the same program, whose document is the same tree */
    netplist_program q;
    bool ok = doc && netplist_parse(doc, (const netplist_weights[]){ netplist_weights_of(p) }, &q, err, sizeof err);
    CHECK(ok, "%s: parse: %s", golden_name, err);
    if (ok) {
        CHECK(q.ninputs == p->ninputs && q.nconsts == p->nconsts && q.nunits == p->nunits, "%s: counts", golden_name);
        for (int k = 0; k < q.nunits && k < p->nunits; k++) {
            CHECK(!strcmp(q.units[k].type, p->units[k].type) && q.units[k].nbottom == p->units[k].nbottom &&
                      q.units[k].out_channels == p->units[k].out_channels &&
                      plist_equal(q.units[k].params, p->units[k].params),
                  "%s: unit %d differs after reading back", golden_name, k);
        }
        for (int k = 0; k < q.ninputs && k < p->ninputs; k++)
            CHECK(!memcmp(&q.inputs[k], &p->inputs[k], sizeof q.inputs[k]), "%s: input %d", golden_name, k);
        for (int k = 0; k < q.nconsts && k < p->nconsts; k++)
            CHECK(!memcmp(&q.consts[k], &p->consts[k], sizeof q.consts[k]), "%s: constant %d", golden_name, k);
        q.out = p->out; /* the output's size is not in the document; the strides are */
        plist_value *again = netplist_document(&q, err, sizeof err);
        CHECK(plist_equal(doc, again), "%s: the re-read program writes a different document", golden_name);
        plist_free(again);
        netplist_free(&q);
    }
    free(golden);
    free(xml);
    plist_free(doc);
}

static void test_flatten(void) {
    netplist_program p;
    char err[256] = "";
    netplist_init(&p);
    netplist_add_input(&p, (netplist_dims){1, 2, 3, 4});
    const char *b[] = {"x0"};
    CHECK(netplist_add_unit(&p, "Flatten", 1, b, 1, err, sizeof err) != NULL, "%s", err);
    p.out = (netplist_dims){1, 1, 1, 24};
    check_program("flatten", &p);
    netplist_free(&p);
}

static void test_sdpa_unit(void) {
    netplist_program p;
    char err[256] = "";
    netplist_init(&p);
    netplist_add_input(&p, (netplist_dims){1, 2, 1, 8}); /* q: seq in C */
    netplist_add_input(&p, (netplist_dims){1, 6, 1, 8}); /* k */
    netplist_add_input(&p, (netplist_dims){1, 6, 1, 8}); /* v */
    netplist_add_input(&p, (netplist_dims){1, 2, 1, 6}); /* mask [Sq, 1, Skv] */
    uint16_t scale;
    float s = 0.35355339f;
    ir_f32_to_f16_array(&s, &scale, 1);
    CHECK(netplist_add_constant(&p, "scale", (netplist_dims){1, 1, 1, 1}, &scale, err, sizeof err), "%s", err);
    const char *b[] = {"x0", "x1", "x2", "scale", "x3"};
    netplist_unit *u = netplist_add_unit(&p, "SDPA", 5, b, 2, err, sizeof err);
    CHECK(u != NULL, "%s", err);
    if (u) plist_set_bool(u->params, "SubtractMax", true);
    p.out = (netplist_dims){1, 2, 1, 8};
    CHECK(p.weights1_len == 2 && p.weights1[0] == (scale & 0xff) && p.weights1[1] == (scale >> 8),
          "weights.1 holds the scale's fp16 bytes, little-endian");
    check_program("sdpa_unit", &p);
    netplist_free(&p);
}

static void test_refusals(void) {
    netplist_program p;
    char err[256] = "";
    netplist_init(&p);
    netplist_add_input(&p, (netplist_dims){1, 1, 1, 4});
    const char *b[] = {"nothing"};
    CHECK(!netplist_add_unit(&p, "Flatten", 1, b, 1, err, sizeof err) && strstr(err, "nothing"), "undeclared bottom: %s", err);
    uint16_t h[2] = {0, 0};
    CHECK(!netplist_add_constant(&p, "x0", (netplist_dims){1, 1, 1, 2}, h, err, sizeof err) && strstr(err, "x0"),
          "a constant named like an input: %s", err);
    CHECK(!netplist_document(&p, err, sizeof err) && strstr(err, "no units"), "empty program: %s", err);
    netplist_free(&p);

    /* documents that are not single-procedure programs over declared names */
    plist_value *doc = plist_dict();
    CHECK(!netplist_parse(doc, NULL, &p, err, sizeof err) && strstr(err, "Version"), "no version: %s", err);
    plist_set_str(doc, "Version", NETPLIST_VERSION);
    plist_push_str(plist_set(doc, "Networks", plist_array()), "net");
    CHECK(!netplist_parse(doc, NULL, &p, err, sizeof err) && strstr(err, "net"), "no network: %s", err);
    plist_free(doc);

    /* a constant past the end of weights.1 */
    netplist_init(&p);
    netplist_add_input(&p, (netplist_dims){1, 1, 1, 4});
    uint16_t four[4] = {0};
    netplist_add_constant(&p, "c", (netplist_dims){1, 1, 1, 4}, four, err, sizeof err);
    const char *b2[] = {"x0", "c"};
    netplist_add_unit(&p, "ElementWise", 2, b2, 1, err, sizeof err);
    p.out = (netplist_dims){1, 1, 1, 4};
    doc = netplist_document(&p, err, sizeof err);
    netplist_program q;
    CHECK(!netplist_parse(doc, &(netplist_weights){ { NULL, p.weights1 }, { 0, 6 } }, &q, err, sizeof err) && strstr(err, "past the end"), "short weights: %s", err);
    CHECK(netplist_parse(doc, &(netplist_weights){ { NULL, p.weights1 }, { 0, 8 } }, &q, err, sizeof err), "exact weights: %s", err);
    netplist_free(&q);
    plist_free(doc);
    netplist_free(&p);
}

/* radius_search writes a UInt8 membership mask (seed 004: "(N,Nc) uint8 membership
 * matrix ... 2 bytes per W-cell, low byte = membership flag"): the unit, the procedure's
 * output and y say UInt8, and the document reads back so. */
static void test_radius_program(void) {
    af_graph *g = af_graph_new();
    af_tensor *y = af_radius_search(af_input(g, "p", AF_F16, AF_SHAPE(20, 3)), af_input(g, "c", AF_F16, AF_SHAPE(4, 3)), 1.0f);
    netplist_program p, q;
    char err[300] = "";
    CHECK(y && netplist_for_node(y, AF_FAMILY_A13, &p, err, sizeof err), "radius: %s", err);
    if (!y) { af_graph_free(g); return; }
    plist_value *doc = netplist_document(&p, err, sizeof err);
    const plist_value *net = plist_get(doc, "net");
    const plist_value *proc = plist_get_kind(doc, "ProcedureList", PLIST_ARRAY);
    const plist_value *ol = proc && proc->n ? plist_get_kind(proc->items[0], "OutputList", PLIST_ARRAY) : NULL;
    const char *unit_t = plist_get_str(plist_get(net, p.units[p.nunits - 1].name), "OutputType");
    const char *y_t = plist_get_str(plist_get(net, "y"), "OutputType");
    const char *ol_t = ol && ol->n ? plist_get_str(ol->items[0], "OutputType") : NULL;
    CHECK(unit_t && y_t && ol_t && !strcmp(unit_t, "UInt8") && !strcmp(y_t, "UInt8") && !strcmp(ol_t, "UInt8"),
          "RadiusSearch output types: unit %s, y %s, OutputList %s", unit_t ? unit_t : "-", y_t ? y_t : "-", ol_t ? ol_t : "-");
    CHECK(netplist_parse(doc, NULL, &q, err, sizeof err) && q.units[q.nunits - 1].out_u8, "read back as UInt8: %s", err);
    netplist_free(&q);
    plist_free(doc);
    netplist_free(&p);
    af_graph_free(g);
}

/* dynamic_slice binds its start through a constant (seed 004: "start bound through a
 * netplist constant (overwrites the index constant in weights.1)"): one input, x, and a
 * UInt16 constant "start" in weights.1 holding the start as every target reads it (7.6
 * rounds to 8 and clamps to 4 - 2 = 2), read by the unit as its second bottom. */
static void test_dslice_program(void) {
    af_graph *g = af_graph_new();
    float sv = 7.6f;
    af_tensor *y = af_dynamic_slice(af_input(g, "x", AF_F16, AF_SHAPE(3, 4)), af_const(g, "s", AF_SHAPE(1), &sv), -1, 2);
    netplist_program p;
    char err[300] = "";
    CHECK(y && netplist_for_node(y, AF_FAMILY_A13, &p, err, sizeof err), "dynamic_slice: %s", err);
    if (!y) { af_graph_free(g); return; }
    const netplist_unit *u = &p.units[p.nunits - 1];
    CHECK(p.ninputs == 1 && p.nconsts == 1 && !strcmp(p.consts[0].name, "start") && p.consts[0].file == 1 && p.consts[0].u16,
          "one input and a UInt16 start constant in weights.1 (%d inputs, %d constants)", p.ninputs, p.nconsts);
    CHECK(p.weights1_len == 2 && p.weights1[0] == 2 && p.weights1[1] == 0, "weights.1 holds the clamped start 2");
    CHECK(u->nbottom == 2 && !strcmp(u->bottom[0], "x0") && !strcmp(u->bottom[1], "start"), "Bottom x0, start");
    plist_value *doc = netplist_document(&p, err, sizeof err);
    const char *ct = plist_get_str(plist_get(plist_get(doc, "net"), "start"), "ConstantType");
    CHECK(ct && !strcmp(ct, "UInt16"), "ConstantType %s", ct ? ct : "-");
    plist_free(doc);
    netplist_free(&p);
    af_graph_free(g);
}

/* The program af_sdpa's node gets (seed 004's facts): q, k, v transposed to seq-in-C, the
 * scale a constant listed in Constants (its fp16 in weights.0), Bottom order q, k, v,
 * scale, mask, SubtractMax true, and the result transposed back. */
static void test_sdpa_program(void) {
    af_graph *g = af_graph_new();
    af_tensor *q = af_input(g, "q", AF_F16, AF_SHAPE(1, 4, 3, 8)), *k = af_input(g, "k", AF_F16, AF_SHAPE(1, 4, 10, 8));
    af_tensor *v = af_input(g, "v", AF_F16, AF_SHAPE(1, 4, 10, 8)), *m = af_input(g, "m", AF_F16, AF_SHAPE(3, 1, 10));
    af_tensor *y = af_sdpa(q, k, v, m, 0.25f);
    netplist_program p;
    char err[300] = "";
    CHECK(y && y->op == IR_OP_SDPA && netplist_for_node(y, AF_FAMILY_A13, &p, err, sizeof err), "sdpa: %s", err);
    if (!y || y->op != IR_OP_SDPA) { af_graph_free(g); return; }
    plist_value *doc = netplist_document(&p, err, sizeof err);
    const plist_value *net = plist_get(doc, "net");
    const plist_value *consts = plist_get_kind(net, "Constants", PLIST_ARRAY);
    CHECK(consts && consts->n == 1 && !strcmp(consts->items[0]->s, "scale"), "Scale is listed in Constants");
    int64_t idx = 0;
    /* seed 004: "Constants_array (list Scale in the Constants array, backed by weights.0)" */
    CHECK(plist_get_int(plist_get(net, "scale"), "ConstantIndex", &idx) && idx == 0, "the scale lives in weights.0");
    CHECK(p.weights0_len == 2 && p.weights0[0] == 0x00 && p.weights0[1] == 0x34 && p.weights1_len == 0,
          "weights.0 holds fp16 0.25 (0x3400), weights.1 nothing");
    const plist_value *units = plist_get_kind(net, "Units", PLIST_ARRAY);
    CHECK(units && units->n == 5, "transpose q, k, v; SDPA; transpose back: %d units", units ? units->n : 0);
    const plist_value *sdpa = units && units->n == 5 ? plist_get(net, units->items[3]->s) : NULL;
    CHECK(sdpa && !strcmp(plist_get_str(sdpa, "Type"), "SDPA"), "the fourth unit is the SDPA layer");
    const plist_value *bottom = plist_get_kind(sdpa, "Bottom", PLIST_ARRAY);
    CHECK(bottom && bottom->n == 5 && !strcmp(bottom->items[0]->s, "u0") && !strcmp(bottom->items[1]->s, "u1") &&
              !strcmp(bottom->items[2]->s, "u2") && !strcmp(bottom->items[3]->s, "scale") && !strcmp(bottom->items[4]->s, "x3"),
          "SDPA reads the transposed q, k, v, then scale, then the mask");
    const plist_value *sm = plist_get_kind(plist_get(sdpa, "Params"), "SubtractMax", PLIST_BOOL);
    CHECK(sm && sm->b, "SubtractMax is true");
    /* seq in C: the transposed q is [1, Sq=3, heads=4, 8]; the mask is [C=Sq, H=1, W=Skv] */
    int64_t oc = 0;
    CHECK(plist_get_int(plist_get(net, "u0"), "OutputChannels", &oc) && oc == 3, "q transposed: C is Sq (%lld)", (long long)oc);
    CHECK(p.inputs[3].dims.c == 3 && p.inputs[3].dims.h == 1 && p.inputs[3].dims.w == 10, "the mask is [C=Sq, H=1, W=Skv]");
    plist_free(doc);
    netplist_free(&p);
    /* the gates: the reliability bounds, flatten's batch */
    af_tensor *src[3] = {af_input(g, "q2", AF_F16, AF_SHAPE(1, 1, 600, 4)), af_input(g, "k2", AF_F16, AF_SHAPE(1, 1, 600, 4)),
                         af_input(g, "v2", AF_F16, AF_SHAPE(1, 1, 600, 4))};
    ir_attrs a = {.scalar = 0.5f};
    af_tensor *raw = ir_build(IR_OP_SDPA, 3, src, &a);
    CHECK(raw && !netplist_for_node(raw, AF_FAMILY_A13, &p, err, sizeof err) && strstr(err, "reliable range"), "bounds: %s", err);
    af_tensor *f = af_flatten(af_input(g, "b2", AF_F16, AF_SHAPE(2, 3, 4, 5)));
    CHECK(f && !netplist_for_node(f, AF_FAMILY_A13, &p, err, sizeof err) && strstr(err, "batch 1"), "flatten batch: %s", err);
    af_graph_free(g);
}

int main(void) {
    test_sdpa_program();
    test_radius_program();
    test_dslice_program();
    test_flatten();
    test_sdpa_unit();
    test_refusals();
    return check_finish("test_netplist");
}
