/* libFuzzer target for tokenizer.json (src/text/hf_tokenizer.c): arbitrary bytes are
 * refused with a message or give a tokenizer that encodes a few fixed texts (every
 * Unicode class and an added-token-like string) to ids inside its vocab, or refuses a
 * byte its vocab lacks with a message; with and without the post-processor's template; the
 * ids decode back to NUL-terminated text.
 *
 *   make fuzz            (builds build-fuzz/fuzz_hf_tokenizer; seeds in tests/corpus/hf_tokenizer) */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    af_hf_tokenizer *t = af_hf_tokenizer_parse(copy, size, "fuzz");
    free(copy);
    if (!t) {
        REQUIRE(af_error_message()[0] != 0);
        return 0;
    }
    static const char *const TEXTS[] = { "", " hello world's 12345\r\n\n  x", "\xce\xb1\xe4\xbd\xa0 \xf0\x9f\x99\x82\t<|eot_id|>",
                                         "\xff\xfe invalid", "a",
                                         "e\xcc\x81\xcc\xa3 \xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8\xe2\x84\xab" };
    int v = af_hf_tokenizer_vocab_size(t);
    for (size_t k = 0; k < sizeof TEXTS / sizeof *TEXTS; k++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        af_status st = (k & 1 ? af_hf_tokenizer_encode_special : af_hf_tokenizer_encode)(t, TEXTS[k], strlen(TEXTS[k]), &ids, &n);
        if (st == AF_OK) {
            for (int64_t i = 0; i < n; i++) REQUIRE(ids[i] >= 0 && ids[i] < v);
            char *text = NULL;
            size_t len = 0;
            if (af_hf_tokenizer_decode(t, ids, n, (int)(k & 2), &text, &len) == AF_OK) {
                REQUIRE(text[len] == 0);
                free(text);
            } else
                REQUIRE(af_error_message()[0] != 0); /* a template id with no token */
            free(ids);
        } else
            REQUIRE(af_error_message()[0] != 0);
    }
    af_hf_tokenizer_free(t);
    return 0;
}
