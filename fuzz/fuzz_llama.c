/* libFuzzer target for the llama2.c model-file reader: parses arbitrary bytes; an
 * accepted file must have a consistent config, survive writing as version 0 and 1 and
 * reading back with identical weights (and identical bytes on a second write), and run
 * the generator for a few tokens when it is small.
 *
 *   make fuzz   (builds it with the other targets; seeds in tests/corpus/llama)
 *
 * Built with -DAF_LLAMA_GEN_CORPUS (and no -fsanitize=fuzzer) it is instead the program
 * that wrote the seed files: ./gen tests/corpus/llama */
#include "llama/llama.h"
#include "aneforge_llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_llama: %s failed\n", #c); abort(); } } while (0)

static void roundtrip(const af_llama_weights *w, int version) {
    uint8_t *bytes = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    REQUIRE(llama_serialize(w, version, &bytes, &n) == AF_OK);
    af_llama_weights *back = NULL;
    int ver = -1;
    REQUIRE(llama_parse(bytes, n, "roundtrip", &back, &ver) == AF_OK && ver == version);
    REQUIRE(!memcmp(&back->cfg, &w->cfg, sizeof w->cfg) && back->count == w->count);
    REQUIRE(!memcmp(back->data, w->data, (size_t)w->count * sizeof(float)));
    REQUIRE(llama_serialize(back, version, &again, &n2) == AF_OK && n2 == n && !memcmp(again, bytes, n));
    af_llama_weights_free(back);
    free(bytes);
    free(again);
}

#ifndef AF_LLAMA_GEN_CORPUS
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    af_llama_weights *w = NULL;
    int version = -1;
    if (llama_parse(data, size, "fuzz", &w, &version) != AF_OK) {
        REQUIRE(w == NULL);
        return 0;
    }
    REQUIRE(version == 0 || version == 1);
    REQUIRE(af_llama_config_check(&w->cfg) == AF_OK && af_llama_weight_count(&w->cfg) == w->count);
    REQUIRE((uint64_t)w->count * 4 < size);
    roundtrip(w, 0);
    roundtrip(w, 1);
    const af_llama_config *c = &w->cfg;
    if ((int64_t)c->n_layers * c->seq_len * c->dim < (1 << 20)) {
        af_llama_gen *g = af_llama_gen_new(w, 1);
        REQUIRE(g);
        for (int t = 0; t < 3 && t < c->seq_len; t++) REQUIRE(af_llama_gen_feed(g, (t * 7) % c->vocab_size) == AF_OK);
        REQUIRE(af_llama_gen_logits(g) != NULL);
        af_llama_gen_free(g);
    }
    af_llama_weights_free(w);
    return 0;
}
#else
static void put(const char *dir, const char *name, const af_llama_weights *w, int version) {
    uint8_t *b;
    size_t n;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (llama_serialize(w, version, &b, &n) || !f || fwrite(b, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
    free(b);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    for (int shared = 0; shared < 2; shared++) {
        af_llama_config c = { 4, 6, 1, 2, 1, 5, 3, shared }; /* two query heads over one KV head */
        af_llama_weights *w = af_llama_weights_new(&c);
        for (int64_t i = 0; i < w->count; i++) w->data[i] = (float)((i * 37 % 17) - 8) / 8.0f;
        char name[64];
        for (int v = 0; v < 2; v++) {
            snprintf(name, sizeof name, "v%d_%s.bin", v, shared ? "shared" : "separate");
            put(dir, name, w, v);
        }
        af_llama_weights_free(w);
    }
    return 0;
}
#endif
