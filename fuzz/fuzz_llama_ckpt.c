/* libFuzzer target for train llama's checkpoints as `generate`, `eval` and `export` read
 * them (tools/llama_ckpt.c): the container, then the llama.* config records and the
 * param.* weight records checked against that config before anything is allocated. Each
 * input is read as it is and again with its SHA-256 trailer made right, so mutations
 * reach the config and record checks. Weights that load must have the config's params.
 *
 *   make fuzz            (builds build-fuzz/fuzz_llama_ckpt; seeds in tests/corpus/llama_ckpt) */
#include "../tools/cli_file.c" /* first: it asks for POSIX before stdio is included */
#include "../tools/llama_ckpt.c"
#include "train/ckpt.h" /* the container's in-memory loader: the fuzzer feeds bytes, not files */
#include "aneforge_llama.h"
#include "data/sha256.h"
#include "fuzz_util.h"

static void try_load(const uint8_t *data, size_t size) {
    ckpt *c = NULL;
    if (ckpt_load_bytes(data, size, "fuzz.ckpt", &c) == AF_OK) {
        af_llama_weights *w = llama_weights_from_ckpt((const af_checkpoint *)(void *)c, "fuzz.ckpt");
        if (w) {
            const af_llama_config *cfg = af_llama_weights_config(w);
            REQUIRE(cfg && af_llama_config_check(cfg) == AF_OK);
            /* every param record was read in full: it is exactly the config's size */
            for (int i = 0; i < af_llama_param_count(cfg); i++) {
                char name[32];
                int64_t bytes = 0;
                af_shape s;
                snprintf(name, sizeof name, "param.%d", i);
                af_llama_param_at(cfg, i, NULL, &s, NULL);
                REQUIRE(ckpt_get(c, name, &bytes) && bytes == af_shape_count(s) * (int64_t)sizeof(float));
            }
            /* and every weight is finite */
            const float *d = af_llama_weights_data(w);
            int64_t total = 0;
            for (int i = 0; i < af_llama_param_count(cfg); i++) {
                af_shape s;
                af_llama_param_at(cfg, i, NULL, &s, NULL);
                total += af_shape_count(s);
            }
            for (int64_t j = 0; j < total; j++) REQUIRE(isfinite(d[j]));
            af_llama_weights_free(w);
        }
    } else {
        REQUIRE(c == NULL);
    }
    ckpt_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try_load(data, size);
    if (size < 32) return 0;
    uint8_t *fixed = malloc(size);
    REQUIRE(fixed);
    memcpy(fixed, data, size);
    data_sha256(fixed, size - 32, fixed + size - 32);
    try_load(fixed, size);
    free(fixed);
    return 0;
}
