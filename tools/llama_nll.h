/* The next-token loss that train llama's validation and eval llama report. */
#ifndef AF_TOOLS_LLAMA_NLL_H
#define AF_TOOLS_LLAMA_NLL_H
/* -log softmax(logits)[target] over vocab logits, in double (nats). */
double llama_nll(const float *logits, int vocab, int target);

#include <stdint.h>
/* The longest window eval llama runs (--seq's range, and the cap on its default). */
#define LLAMA_EVAL_MAX_SEQ 65536
/* eval llama's window: `requested` (--seq) when nonzero, else the model's seq_len, fewer
 * for a short file (tokens - 1), and at most LLAMA_EVAL_MAX_SEQ. */
int llama_eval_window(int64_t tokens, int seq_len, long requested);
#endif
