/* The next-token loss that train llama's validation and eval llama report. */
#ifndef AF_TOOLS_LLAMA_NLL_H
#define AF_TOOLS_LLAMA_NLL_H
/* -log softmax(logits)[target] over vocab logits, in double (nats). */
double llama_nll(const float *logits, int vocab, int target);
#endif
