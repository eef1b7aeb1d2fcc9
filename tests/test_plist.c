/* The property-list writer against Python's plistlib: tests/fixtures/plist/ (*.plist) were
 * written once by make_plist_fixtures.py (plistlib.dumps, sort_keys=True) from the same
 * values this file builds; the writer must reproduce them byte for byte. */
#include "netplist/plist.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* Reads the golden bytes back: a tree that writes the same bytes again, and the tree we
 * built (except where plistlib normalises: carriage returns become newlines). */
static void check_read_back(const char *name, const char *golden, size_t glen, plist_value *v) {
    char err[256] = "";
    plist_value *back = plist_read_xml(golden, glen, err, sizeof err);
    CHECK(back != NULL, "%s: reading plistlib's bytes: %s", name, err);
    size_t len = 0;
    char *again = back ? plist_write_xml(back, &len, err, sizeof err) : NULL;
    CHECK(again && len == glen && !memcmp(again, golden, glen), "%s: the tree read back writes other bytes", name);
    free(again);
    if (plist_get(v, "crlf")) plist_set_str(v, "crlf", "l1\nl2\nl3"); /* plistlib writes CRs as newlines */
    CHECK(plist_equal(back, v), "%s: read back to a different tree", name);
    plist_free(back);
}

static void check_golden(const char *name, plist_value *v) {
    char rel[1024], err[256] = "";
    snprintf(rel, sizeof rel, "%s/tests/fixtures/plist/%s.plist", AF_SOURCE_DIR, name);
    size_t glen = 0, len = 0;
    char *golden = test_read_file(rel, &glen);
    char *mine = plist_write_xml(v, &len, err, sizeof err);
    CHECK(golden != NULL, "%s: fixture missing", rel);
    CHECK(mine != NULL, "%s: writer failed: %s", name, err);
    if (golden && mine) {
        size_t at = 0;
        while (at < len && at < glen && golden[at] == mine[at]) at++;
        CHECK(len == glen && at == len, "%s: differs from plistlib at byte %zu:\n--- plistlib\n%.80s\n--- ours\n%.80s",
              name, at, golden + (at > 20 ? at - 20 : 0), mine + (at > 20 ? at - 20 : 0));
    }
    if (golden) check_read_back(name, golden, glen, v);
    free(golden);
    free(mine);
    plist_free(v);
}

static void fill_data(unsigned char *b, int n, int seed) {
    for (int k = 0; k < n; k++) b[k] = (unsigned char)((seed * 31 + 7 * k + (k * k) % 13) % 256);
}

static plist_value *data_value(int n, int seed) {
    unsigned char b[256];
    fill_data(b, n, seed);
    return plist_data(b, (size_t)n);
}

static plist_value *nest(int depth, plist_value *leaf) {
    for (int k = 0; k < depth; k++) {
        plist_value *a = plist_array();
        plist_push(a, leaf);
        leaf = a;
    }
    return leaf;
}

static void test_scalars(void) {
    plist_value *d = plist_dict();
    plist_set_int(d, "zero", 0);
    plist_set_int(d, "neg", -5);
    plist_set_int(d, "big", 1099511627776LL);
    plist_set_int(d, "min", INT64_MIN);
    plist_set_int(d, "max", INT64_MAX);
    plist_set_bool(d, "yes", true);
    plist_set_bool(d, "no", false);
    plist_set_str(d, "text", "a<b&c>d");
    plist_set_str(d, "empty", "");
    plist_set_str(d, "utf8", "caf\xc3\xa9 \xe2\x86\x92 \xcf\x80");
    plist_set_str(d, "tabs", "x\ty\nz");
    plist_set_str(d, "crlf", "l1\r\nl2\rl3");
    static const double reals[] = {1.0, 0.1, 1e-05, 0.0001, 1.5e16, 1e16, 1e15, 123456.789, -0.0, 0.0, 1.0 / 3,
                                   100.0, 1e22, 5e-324, 1.7976931348623157e308, -2.5, 0.000123, 65504.0,
                                   6.103515625e-05};
    plist_value *a = plist_set(d, "reals", plist_array());
    for (size_t k = 0; k < sizeof reals / sizeof *reals; k++) plist_push(a, plist_real(reals[k]));
    check_golden("scalars", d);
}

static void test_containers(void) {
    plist_value *d = plist_dict();
    plist_set(d, "empty_dict", plist_dict());
    plist_set(d, "empty_array", plist_array());
    plist_value *nested = plist_set(d, "nested", plist_dict());
    plist_value *b = plist_set(nested, "b", plist_array());
    plist_push(b, plist_int(1));
    plist_value *inner = plist_push(b, plist_dict());
    plist_set_int(inner, "z", 2);
    plist_push(plist_set(inner, "a", plist_array()), plist_bool(true));
    plist_set(nested, "a", plist_dict());
    plist_value *order = plist_set(d, "order", plist_dict());
    const char *keys[] = {"b", "a", "B", "_x", "a1", "a10", "a2", "\xc3\xa9", "Z"};
    for (int k = 0; k < 9; k++) plist_set_int(order, keys[k], k + 1);
    check_golden("containers", d);
}

static void test_data(void) {
    plist_value *d = plist_dict();
    plist_set(d, "d0", data_value(0, 1));
    plist_set(d, "d1", data_value(1, 2));
    plist_set(d, "d2", data_value(2, 3));
    plist_set(d, "d3", data_value(3, 4));
    plist_set(d, "d100", data_value(100, 5));
    plist_set(d, "deep", nest(9, data_value(70, 6)));
    plist_set(d, "mid", nest(4, data_value(200, 7)));
    check_golden("data", d);
}

static void test_refusals(void) {
    char err[256] = "";
    plist_value *d = plist_dict();
    plist_set_str(d, "bad", "bell\x07");
    CHECK(!plist_write_xml(d, NULL, err, sizeof err) && strstr(err, "control character"), "control char: %s", err);
    plist_free(d);
    plist_value *deep = nest(PLIST_MAX_DEPTH + 2, plist_int(1));
    err[0] = 0;
    CHECK(!plist_write_xml(deep, NULL, err, sizeof err) && strstr(err, "deeper"), "depth: %s", err);
    plist_free(deep);
    d = plist_dict();
    plist_set(d, "lost", NULL); /* an allocation that failed */
    err[0] = 0;
    CHECK(!plist_write_xml(d, NULL, err, sizeof err) && strstr(err, "memory"), "oom: %s", err);
    plist_free(d);
    /* set replaces an existing key */
    d = plist_dict();
    plist_set_int(d, "k", 1);
    plist_set_int(d, "k", 2);
    int64_t v = 0;
    CHECK(d->n == 1 && plist_get_int(d, "k", &v) && v == 2, "replace: n %d v %lld", d->n, (long long)v);
    plist_free(d);
}

/* Malformed documents are refused with a message, never crash. */
static void test_reader_refusals(void) {
    static const struct { const char *doc, *want; } cases[] = {
        {"", "expected an element"},
        {"<dict/>", "root element"},
        {"<plist><dict><key>a</key></dict></plist>", "expected an element"},
        {"<plist><dict><string>x</string></dict></plist>", "must start with <key>"},
        {"<plist><dict><key>a</key><true/><key>a</key><true/></dict></plist>", "repeats a key"},
        {"<plist><integer>12x</integer></plist>", "whole number"},
        {"<plist><integer>9223372036854775808</integer></plist>", "int64"},
        {"<plist><real>1.5.2</real></plist>", "not a number"},
        {"<plist><data>AB=C</data></plist>", "base64"},
        {"<plist><data>ABC</data></plist>", "4-character"},
        {"<plist><string>a &bogus; b</string></plist>", "entity"},
        {"<plist><string>open", "end of the document"},
        {"<plist><date>2020</date></plist>", "not a plist value"},
        {"<plist><true/></plist>trailing", "after </plist>"},
        {"<plist><array><true/></plist>", "expected an element"},
        {"<!-- never closed", "comment"},
    };
    char err[256];
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        err[0] = 0;
        plist_value *v = plist_read_xml(cases[k].doc, strlen(cases[k].doc), err, sizeof err);
        CHECK(!v && strstr(err, cases[k].want), "'%s': got %s, want a message with '%s'", cases[k].doc, v ? "a value" : err,
              cases[k].want);
        plist_free(v);
    }
    /* nesting past the limit */
    char deep[2048] = "<plist>";
    for (int k = 0; k < PLIST_MAX_DEPTH + 2; k++) strcat(deep, "<array>");
    plist_value *v = plist_read_xml(deep, strlen(deep), err, sizeof err);
    CHECK(!v && strstr(err, "deeper"), "deep nesting: %s", err);
    plist_free(v);
    /* entities and character references decode */
    const char *ok = "<?xml version=\"1.0\"?><plist version=\"1.0\"><!-- c --><string>&lt;&amp;&#65;&#x3c0;</string></plist>";
    v = plist_read_xml(ok, strlen(ok), err, sizeof err);
    CHECK(v && v->kind == PLIST_STRING && !strcmp(v->s, "<&A\xcf\x80"), "entities: %s", v ? v->s : err);
    plist_free(v);
}

int main(void) {
    test_reader_refusals();
    test_scalars();
    test_containers();
    test_data();
    test_refusals();
    return check_finish("test_plist");
}
