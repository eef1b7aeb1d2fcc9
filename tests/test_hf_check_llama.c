/* af_hf_check_llama: config.json alone says whether llama2.c's layout holds the folder's
 * model (train llama --init DIR picks its route by it, without reading the weights). */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_hf.h"
#include "aneforge_llama.h"
#include "support/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

int main(void) {
    char dir[] = "/tmp/af_hf_init_XXXXXX", cfg[64], wts[64];
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(wts, sizeof wts, "%s/model.safetensors", dir);
    af_llama_config c;
    CHECK(af_llama_preset("tiny", 64, &c) == AF_OK, "preset: %s", af_error_message());
    af_llama_weights *w = af_llama_weights_new(&c);
    af_hf_model *m = w ? af_hf_from_llama(w) : NULL;
    CHECK(m && af_hf_save(m, dir) == AF_OK, "save: %s", af_error_message());
    CHECK(af_hf_check_llama(dir) == AF_OK, "a folder from llama2.c's layout fits it: %s", af_error_message());
    /* the weights are not read: without them the answer is the same */
    unlink(wts);
    CHECK(af_hf_check_llama(dir) == AF_OK, "config.json alone: %s", af_error_message());
    size_t len = 0;
    char *text = test_read_file(cfg, &len), *at = text ? strstr(text, "\"rope_theta\": 10000") : NULL;
    CHECK(at != NULL, "config.json has rope_theta 10000");
    if (at) {
        memcpy(at, "\"rope_theta\": 50000", 19);
        write_text(cfg, text);
        CHECK(af_hf_check_llama(dir) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "rope_theta 50000"),
              "rope_theta 50000 named: %s", af_error_message());
    }
    free(text);
    write_text(cfg, "{\"architectures\": [\"Qwen3ForCausalLM\"]}");
    CHECK(af_hf_check_llama(dir) != AF_OK, "an incomplete config refused: %s", af_error_message());
    unlink(cfg);
    CHECK(af_hf_check_llama(dir) == AF_ERR_IO && strstr(af_error_message(), "config.json"), "no config.json: %s",
          af_error_message());
    rmdir(dir);
    af_hf_free(m);
    af_llama_weights_free(w);
    return check_finish("hf_check_llama");
}
