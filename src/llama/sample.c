/* run.c's sampler, step for step in float so that a seed picks run.c's tokens: the
 * xorshift coin, temperature, softmax, and multinomial or nucleus (top-p) sampling. */
#include "llama/llama.h"
#include "aneforge_llama.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float prob; int index; } prob_index;

struct af_llama_sampler {
    int n;
    float temperature, top_p;
    uint64_t rng;
    float *probs;
    prob_index *sorted;
};

/* xorshift* as run.c's random_u32 / random_f32: a float in [0, 1). */
static float coin(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint32_t u = (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
    return (float)(u >> 8) / 16777216.0f;
}

af_llama_sampler *af_llama_sampler_new(int vocab_size, float temperature, float top_p, uint64_t seed) {
    if (vocab_size < 1 || !(temperature >= 0) || !isfinite(temperature) || !(top_p >= 0 && top_p <= 1) || !seed) {
        ir_fail(AF_ERR_INVALID, "af_llama_sampler_new: vocab_size %d (>= 1), temperature %g (>= 0), top_p %g "
                "(0..1), seed %llu (not 0: xorshift would stay at 0)", vocab_size, temperature, top_p,
                (unsigned long long)seed);
        return NULL;
    }
    af_llama_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->probs = malloc((size_t)vocab_size * sizeof(float));
        s->sorted = malloc((size_t)vocab_size * sizeof(prob_index));
    }
    if (!s || !s->probs || !s->sorted) {
        af_llama_sampler_free(s);
        ir_fail(AF_ERR_NOMEM, "af_llama_sampler_new: out of memory for %d probabilities", vocab_size);
        return NULL;
    }
    *s = (af_llama_sampler){ vocab_size, temperature, top_p, seed, s->probs, s->sorted };
    return s;
}

void af_llama_sampler_free(af_llama_sampler *s) {
    if (!s) return;
    free(s->probs);
    free(s->sorted);
    free(s);
}

/* Higher probability first; equal ones by lower id, so the order never depends on qsort. */
static int by_prob(const void *a, const void *b) {
    const prob_index *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int sample_all(const float *p, int n, float r) {
    float cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += p[i];
        if (r < cdf) return i;
    }
    return n - 1; /* rounding */
}

static int sample_top_p(af_llama_sampler *s, float r) {
    const int n = s->n;
    const float cutoff = (1.0f - s->top_p) / (float)(n - 1); /* smaller ones can never make the cut */
    int m = 0;
    for (int i = 0; i < n; i++)
        if (s->probs[i] >= cutoff) s->sorted[m++] = (prob_index){ s->probs[i], i };
    if (m == 0) { /* all below the cutoff (top_p < 1/n, flat): run.c reads out of bounds; take the top one */
        for (int i = 1; i < n; i++)
            if (s->probs[i] > s->probs[m]) m = i;
        return m;
    }
    qsort(s->sorted, (size_t)m, sizeof *s->sorted, by_prob);
    float cumulative = 0;
    int last = m - 1;
    for (int i = 0; i < m; i++) {
        cumulative += s->sorted[i].prob;
        if (cumulative > s->top_p) {
            last = i;
            break;
        }
    }
    float x = r * cumulative, cdf = 0;
    for (int i = 0; i <= last; i++) {
        cdf += s->sorted[i].prob;
        if (x < cdf) return s->sorted[i].index;
    }
    return s->sorted[last].index;
}

int32_t af_llama_sample(af_llama_sampler *s, const float *logits) {
    if (!s || !logits) return ir_fail(AF_ERR_INVALID, "af_llama_sample: sampler or logits is NULL"), -1;
    const int n = s->n;
    for (int i = 0; i < n; i++)
        if (!isfinite(logits[i]))
            return ir_fail(AF_ERR_NUMERIC, "af_llama_sample: logit %d is %g", i, logits[i]), -1;
    if (s->temperature == 0) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    float *p = s->probs, max = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) {
        p[i] = logits[i] / s->temperature;
        max = p[i] > max ? p[i] : max;
    }
    for (int i = 0; i < n; i++) sum += p[i] = expf(p[i] - max);
    for (int i = 0; i < n; i++) p[i] /= sum;
    float r = coin(&s->rng);
    if (n == 1) return 0;
    if (s->top_p <= 0 || s->top_p >= 1) return sample_all(p, n, r);
    return sample_top_p(s, r);
}
