/* See cli_run.h. */
#define _POSIX_C_SOURCE 200809L
#include "support/cli_run.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int cli_run_bin(const char *bin, const char *args, int merge, char *out, size_t cap) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s %s", bin, args, merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

double json_num(const char *s, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(s, k);
    return p ? strtod(p + strlen(k), NULL) : NAN;
}

double host_window_loss(const af_llama_weights *w, const int32_t *tok, int64_t n, int T) {
    const int V = af_llama_weights_config(w)->vocab_size;
    af_llama_gen *g = af_llama_gen_new(w, 1);
    double sum = 0;
    int64_t count = 0;
    for (int64_t s = 0; g && s + T < n; s += T) {
        af_llama_gen_reset(g);
        for (int i = 0; i < T; i++) {
            if (af_llama_gen_feed(g, tok[s + i])) { af_llama_gen_free(g); return NAN; }
            const float *l = af_llama_gen_logits(g);
            double mx = l[0], z = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, l[v]);
            for (int v = 0; v < V; v++) z += exp(l[v] - mx);
            sum += mx + log(z) - l[tok[s + i + 1]];
            count++;
        }
    }
    af_llama_gen_free(g);
    return g && count ? sum / (double)count : NAN;
}
