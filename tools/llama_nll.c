/* Cross-entropy of one position from its logits, in double so a file's mean over
 * millions of tokens loses nothing to float round-off. */
#include "llama_nll.h"

#include <math.h>

int llama_eval_window(int64_t tokens, int seq_len, long requested) {
    if (requested) return (int)requested;
    int64_t t = tokens - 1 < seq_len ? tokens - 1 : seq_len;
    return (int)(t < LLAMA_EVAL_MAX_SEQ ? t : LLAMA_EVAL_MAX_SEQ);
}

double llama_nll(const float *logits, int vocab, int target) {
    double mx = logits[0], s = 0;
    for (int v = 1; v < vocab; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int v = 0; v < vocab; v++) s += exp(logits[v] - mx);
    return mx + log(s) - logits[target];
}
