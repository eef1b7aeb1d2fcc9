/* libFuzzer target for config.json (src/hf/config.c), PEFT's adapter_config.json
 * (src/hf/lora.c) and the strict JSON reader under both: arbitrary bytes are refused with
 * a message or give a config whose sizes are in range and which, written back
 * (hf_config_json), reads to the same config; an adapter config gives a rank in range
 * and at least one target.
 *
 *   make fuzz            (builds build-fuzz/fuzz_hf_config; seeds in tests/corpus/hf_config) */
#include "hf/hf.h"
#include "ir/json.h"
#include "aneforge.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    char err[256];
    json_doc *d = ir_json_parse(copy, size, err, sizeof err);
    REQUIRE(d != NULL || err[0]);
    ir_json_free(d);
    hf_lora_cfg lc;
    if (hf_lora_parse_config(copy, size, "fuzz", &lc) == AF_OK)
        REQUIRE(lc.rank >= 1 && lc.rank <= 4096 && lc.alpha > 0 && lc.targets && lc.targets < (1u << HF_NPROJ));
    else
        REQUIRE(af_error_message()[0] != 0);
    hf_config c, c2;
    if (hf_config_parse(copy, size, "fuzz", &c) != AF_OK) {
        REQUIRE(af_error_message()[0] != 0);
        free(copy);
        return 0;
    }
    REQUIRE(c.vocab > 0 && c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.kv_heads > 0 && c.heads % c.kv_heads == 0);
    REQUIRE(c.head_dim > 0 && c.head_dim % 2 == 0 && c.eps > 0 && c.theta > 0);
    REQUIRE(hf_slot_count(&c) >= 3);
    char *back = hf_config_json(&c);
    REQUIRE(back != NULL);
    REQUIRE(hf_config_parse(back, strlen(back), "back", &c2) == AF_OK);
    REQUIRE(c2.vocab == c.vocab && c2.hidden == c.hidden && c2.layers == c.layers && c2.heads == c.heads &&
            c2.kv_heads == c.kv_heads && c2.head_dim == c.head_dim && c2.tie == c.tie && c2.qkv_bias == c.qkv_bias &&
            c2.o_bias == c.o_bias && c2.qk_norm == c.qk_norm && c2.eps == c.eps && c2.theta == c.theta &&
            c2.rope_llama3 == c.rope_llama3 && c2.rope_factor == c.rope_factor);
    free(back);
    free(copy);
    return 0;
}
