/* libFuzzer target for family files (src/engine/family_file.c): arbitrary bytes are
 * rejected with a message or parse into members that write back and re-read to the same
 * members (the writer and reader agree); a parsed file that is a family loads as one
 * whose every field is within the field table's range.
 *
 *   make fuzz-build && ./build-fuzz/fuzz_family -max_total_time=120 tests/corpus/family */
#include "engine/family.h"
#include "engine/family_file.h"
#include "fuzz_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ff_doc d;
    if (ff_parse("fuzz.json", data, size, &d) != AF_OK) {
        REQUIRE(d.n == 0 && d.m == NULL);
        return 0;
    }
    REQUIRE(d.n >= 0 && d.n <= FF_MAX_MEMBERS);
    for (int i = 0; i < d.n; i++) {
        REQUIRE(d.m[i].key[0] && strlen(d.m[i].key) <= FF_MAX_KEY);
        REQUIRE((d.m[i].type == FF_STR) == (d.m[i].str != NULL));
        for (int j = 0; j < i; j++) REQUIRE(strcmp(d.m[i].key, d.m[j].key));
    }
    /* write, read back, compare */
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_family_%d.json", (int)getpid());
    if (ff_write(path, &d) == AF_OK) {
        ff_doc r;
        REQUIRE(ff_read(path, &r) == AF_OK);
        REQUIRE(r.n == d.n);
        for (int i = 0; i < d.n; i++) {
            const ff_member *a = &d.m[i], *b = &r.m[i];
            REQUIRE(!strcmp(a->key, b->key));
            if (a->type == FF_STR) REQUIRE(b->type == FF_STR && !strcmp(a->str, b->str));
            else if (a->type == FF_INT || a->type == FF_BOOL || a->type == FF_NULL) REQUIRE(a->type == b->type && a->i == b->i);
        }
        ff_free(&r);
        remove(path);
    }
    /* as a family: every field in range when it converts */
    ane_family_info fi;
    if (ane_family_from_doc(&d, "fuzz.json", &fi) == AF_OK)
        for (int f = 0; f < ane_family_nfields; f++)
            REQUIRE(ane_family_get(&fi, f) >= ane_family_fields[f].lo && ane_family_get(&fi, f) <= ane_family_fields[f].hi);
    ff_free(&d);
    return 0;
}
