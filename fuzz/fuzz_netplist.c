/* libFuzzer target for the XML property-list reader and the net.plist program reader
 * (what the fake framework and any tool reading a net.plist trust): arbitrary bytes must
 * be refused with a message or read to a tree that writes back to a document reading to
 * the same bytes again (writer and reader agree); a tree that is a net.plist program must
 * give a program whose document reads back to the same program, and its graph (every
 * unit through its reader) is built or refused with a message, never crashes.
 *
 *   make fuzz            (builds build-fuzz/fuzz_netplist; seeds in tests/corpus/netplist) */
#include "netplist/netplist.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256] = "";
    plist_value *v = plist_read_xml((const char *)data, size, err, sizeof err);
    if (!v) {
        REQUIRE(err[0] != 0);
        return 0;
    }
    size_t n1 = 0, n2 = 0;
    char *x1 = plist_write_xml(v, &n1, err, sizeof err); /* may refuse control characters */
    if (x1) {
        plist_value *w = plist_read_xml(x1, n1, err, sizeof err);
        REQUIRE(w != NULL);
        char *x2 = plist_write_xml(w, &n2, err, sizeof err);
        REQUIRE(x2 && n1 == n2 && !memcmp(x1, x2, n1));
        free(x2);
        plist_free(w);
    }
    free(x1);
    netplist_program p, q;
    if (netplist_parse(v, NULL, &p, err, sizeof err)) {
        plist_value *doc = netplist_document(&p, err, sizeof err);
        REQUIRE(doc != NULL);
        REQUIRE(netplist_parse(doc, NULL, &q, err, sizeof err));
        REQUIRE(q.ninputs == p.ninputs && q.nconsts == p.nconsts && q.nunits == p.nunits);
        for (int k = 0; k < p.nunits; k++)
            REQUIRE(!strcmp(q.units[k].type, p.units[k].type) && plist_equal(q.units[k].params, p.units[k].params));
        netplist_free(&q);
        plist_free(doc);
        af_graph *g = af_graph_new();
        af_tensor *in[NETPLIST_MAX_INPUTS], *out = NULL;
        uint8_t w1[64] = {0}; /* constants past 64 bytes are refused */
        err[0] = 0;
        if (g && !netplist_graph(&p, &(netplist_weights){ { w1, w1 }, { sizeof w1, sizeof w1 } }, g, in, &out, err, sizeof err)) REQUIRE(err[0] != 0);
        af_graph_free(g);
        netplist_free(&p);
    } else {
        REQUIRE(err[0] != 0);
    }
    plist_free(v);
    return 0;
}
