/*
 * aneforge: train neural networks on the Apple Neural Engine, or on a CPU and a
 * simulated engine that reproduce its numerics and compiler limits.
 *
 * Lifecycle (like SQLite's): build a graph, compile it into a model, run the model
 * many times, free the model and the graph (in either order).
 *
 * Ownership: a graph owns every tensor built in it (never free a tensor); a model owns
 * its internal buffers, its copies of the constants and a reference to its graph; the
 * caller owns every buffer it passes in and every string it passes (they are copied).
 * Each constructor below says who frees what and what may be freed when.
 *
 * Errors: builders never abort. The first error sticks to the graph with a message that
 * names the op, the shapes and the fix; that builder and every later builder that gets a
 * NULL operand return NULL, and af_compile reports the error. Functions that can fail
 * return af_status (or NULL); af_error_message() says why the last call on this thread
 * failed.
 *
 * Threads (tests/test_threads.c, also under ThreadSanitizer: make test-tsan):
 *   - a graph is built by one thread at a time; while nobody builds in it, several
 *     threads may compile models from it at once;
 *   - a model may be used from any thread, and from several at once: af_run and the
 *     state and stats functions on one model take turns (a model is one program);
 *     different models run in parallel;
 *   - a trainer, a dataset and a checkpoint are used by one thread at a time;
 *   - the rest is thread-safe: error messages are per thread, the log function and
 *     the simulated engines' caches are locked, the Neural Engine runtime's cache too.
 * The library reads no environment variables and prints nothing (see af_set_log).
 */
#ifndef ANEFORGE_H
#define ANEFORGE_H

#include <stddef.h>
#include <stdint.h>

/* What the shared library exports: exactly the functions declared here (the library is
 * built with hidden visibility; a test compares its exports with this header). */
#if defined(_WIN32) && defined(AF_BUILDING_SHARED)
#define AF_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define AF_API __attribute__((visibility("default")))
#else
#define AF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version; af_version() says which one a program actually loaded. */
#define AF_VERSION_MAJOR 0
#define AF_VERSION_MINOR 2
#define AF_VERSION_PATCH 0
#define AF_VERSION_STR_(x) #x
#define AF_VERSION_STR(x) AF_VERSION_STR_(x)
#define AF_VERSION AF_VERSION_STR(AF_VERSION_MAJOR) "." AF_VERSION_STR(AF_VERSION_MINOR) "." AF_VERSION_STR(AF_VERSION_PATCH)
AF_API const char *af_version(void);
#define AF_MAX_RANK 6

/* ---------------------------------------------------------------- basic types */

typedef enum { AF_F32 = 0, AF_F16 = 1 } af_dtype;

typedef enum {
    AF_OK = 0,
    AF_ERR_INVALID,     /* a bad argument: NULL, out-of-range axis, wrong dtype */
    AF_ERR_SHAPE,       /* shapes that do not fit together */
    AF_ERR_UNSUPPORTED, /* valid, but not supported by this target or op */
    AF_ERR_NOMEM,
    AF_ERR_IO,          /* a file could not be opened, read or written */
    AF_ERR_CORRUPT,     /* a file failed its format or checksum checks */
    AF_ERR_NUMERIC      /* inf or nan where finite values are required */
} af_status;

typedef struct { int rank; int64_t dim[AF_MAX_RANK]; } af_shape;

/* The most elements one tensor may hold (2^40: 4 TiB of fp32). Builders reject larger
 * shapes, so element counts, and byte counts derived from them, never overflow. */
#define AF_MAX_ELEMENTS ((int64_t)1 << 40)

/* AF_SHAPE(128, 784) builds an af_shape (in C and in C++); more than AF_MAX_RANK dims
 * gives rank -1, which every builder rejects. */
AF_API af_shape af_shape_make(int rank, const int64_t *dims);
#ifndef __cplusplus
#define AF_SHAPE(...) \
    af_shape_make((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#endif
/* The number of elements: the product of the dims (0 when a dim is 0), or 0 for an
 * invalid shape: rank outside 0..AF_MAX_RANK, a negative dim, or a product beyond
 * AF_MAX_ELEMENTS (an int64 overflow included: the product is checked, never wrapped). */
AF_API int64_t af_shape_count(af_shape s);

typedef struct af_graph  af_graph;
typedef struct af_tensor af_tensor;
typedef struct af_model  af_model;

/* Why the last failing call on this thread failed ("" when none did). */
AF_API const char *af_error_message(void);
/* Records a message (printf-style) as this thread's last error and returns st, for code
 * that reports through the same channel as the library: an af_net callback that fails,
 * an application's own reader (`return af_fail(AF_ERR_CORRUPT, "%s: ...", path);`). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
AF_API af_status af_fail(af_status st, const char *fmt, ...);

/* Warnings and notes (a skipped step, an engine guard, the precision check) go to the
 * log function, never to a stream of the library's choosing; none is set at start, so
 * the library is silent until one is. The CLI points it at stderr. Process-wide; the
 * function may be called from any thread that runs the library, one call at a time. */
typedef enum { AF_LOG_INFO = 0, AF_LOG_WARN = 1 } af_log_level;
typedef void (*af_log_fn)(af_log_level level, const char *message, void *user);
AF_API void af_set_log(af_log_fn fn, void *user); /* fn NULL: silent */
AF_API const char *af_status_name(af_status s);

/* Memory rule: an array the library hands to the caller (its doc says "free it with
 * af_free": .npy data, token ids, decoded text, ...) is freed with af_free, never with
 * libc's free, so that a program whose allocator differs from the library's (another C
 * runtime, a binding) frees it where it was allocated. NULL is fine. Objects with their
 * own constructor are freed by their own *_free function. */
AF_API void af_free(void *p);

/* ---------------------------------------------------------------- graph */

/* A new empty graph, freed with af_graph_free. af_graph_free drops the caller's
 * reference: the graph and every tensor in it are freed once no model compiled from it
 * is alive either, so it may come before af_model_free. Tensors must not be used or
 * built on after the caller's af_graph_free. */
AF_API af_graph *af_graph_new(void);
AF_API void      af_graph_free(af_graph *g);
/* The first error recorded in the graph, or NULL. */
AF_API const char *af_graph_error(const af_graph *g);
AF_API int       af_graph_size(const af_graph *g);         /* number of tensors built */

/* Leaves. Names and data are copied; the tensors belong to g (as does every tensor a
 * builder below returns) and live as long as g. */
AF_API af_tensor *af_input(af_graph *g, const char *name, af_dtype dt, af_shape s);
/* A baked constant; `data` (count(s) floats) is copied. */
AF_API af_tensor *af_const(af_graph *g, const char *name, af_shape s, const float *data);
AF_API af_tensor *af_const_fill(af_graph *g, af_shape s, float value);
/* A trainable input carrying its fp32 master value (copied; NULL = zeros). */
AF_API af_tensor *af_parameter(af_graph *g, const char *name, af_shape s, const float *init);

/* Tensor facts. */
AF_API af_shape    af_tensor_shape(const af_tensor *t);
AF_API af_dtype    af_tensor_dtype(const af_tensor *t);
AF_API const char *af_tensor_name(const af_tensor *t);
AF_API const char *af_tensor_op(const af_tensor *t);
AF_API af_graph   *af_tensor_graph(const af_tensor *t);
AF_API int         af_tensor_is_parameter(const af_tensor *t);
/* The fp32 master value of a parameter or constant (count(shape) floats), or NULL; it
 * belongs to the graph. Writing it changes what later af_compile calls bake: models
 * already compiled keep the values they were compiled with (fp32 and fp16 alike). */
AF_API float      *af_tensor_value(af_tensor *t);

/* ---------------------------------------------------------------- ops
 * Binary ops broadcast like NumPy. Results take the dtype of the first operand. */
AF_API af_tensor *af_add(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_sub(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_mul(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_div(af_tensor *a, af_tensor *b);          /* real_div */
AF_API af_tensor *af_maximum(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_minimum(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_pow(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_greater(af_tensor *a, af_tensor *b);      /* 1.0 where a > b, else 0.0 */
AF_API af_tensor *af_less(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_equal(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_select(af_tensor *cond, af_tensor *a, af_tensor *b); /* cond != 0 ? a : b */
AF_API af_tensor *af_adds(af_tensor *x, float s);              /* x + s */
AF_API af_tensor *af_muls(af_tensor *x, float s);              /* x * s */

AF_API af_tensor *af_neg(af_tensor *x);
AF_API af_tensor *af_abs(af_tensor *x);
AF_API af_tensor *af_square(af_tensor *x);
AF_API af_tensor *af_sqrt(af_tensor *x);
AF_API af_tensor *af_rsqrt(af_tensor *x);
AF_API af_tensor *af_inverse(af_tensor *x);                    /* 1 / x */
AF_API af_tensor *af_exp(af_tensor *x);
AF_API af_tensor *af_log(af_tensor *x);
AF_API af_tensor *af_tanh(af_tensor *x);
AF_API af_tensor *af_sigmoid(af_tensor *x);
AF_API af_tensor *af_relu(af_tensor *x);
typedef enum { AF_GELU_EXACT = 0, AF_GELU_TANH = 1 } af_gelu_mode;
AF_API af_tensor *af_gelu(af_tensor *x, af_gelu_mode mode);
AF_API af_tensor *af_silu(af_tensor *x);
AF_API af_tensor *af_sin(af_tensor *x);
AF_API af_tensor *af_cos(af_tensor *x);
AF_API af_tensor *af_erf(af_tensor *x);                        /* exact gelu's gradient needs it */
AF_API af_tensor *af_floor(af_tensor *x);                      /* zero gradient */
AF_API af_tensor *af_atan(af_tensor *x);
AF_API af_tensor *af_asin(af_tensor *x);                       /* x in [-1, 1] */
AF_API af_tensor *af_acos(af_tensor *x);                       /* x in [-1, 1] */
AF_API af_tensor *af_atanh(af_tensor *x);                      /* x in (-1, 1) */

/* x[..., K] times a baked weight stored transposed, wt [N, K] (a constant): [..., N]. */
AF_API af_tensor *af_matmul_w(af_tensor *x, af_tensor *wt);
/* Tensor matmul / bmm: a[..., M, K] @ b[..., K, N] with broadcast batch dims; the
 * flags transpose the last two axes of an operand first. */
AF_API af_tensor *af_matmul(af_tensor *a, af_tensor *b, int transpose_a, int transpose_b);

/* Reductions over `naxes` axes (negative axes count from the end). */
AF_API af_tensor *af_reduce_sum(af_tensor *x, int naxes, const int *axes, int keep_dims);
AF_API af_tensor *af_reduce_mean(af_tensor *x, int naxes, const int *axes, int keep_dims);
AF_API af_tensor *af_reduce_max(af_tensor *x, int naxes, const int *axes, int keep_dims);
AF_API af_tensor *af_reduce_min(af_tensor *x, int naxes, const int *axes, int keep_dims);
AF_API af_tensor *af_softmax(af_tensor *x, int axis);

AF_API af_tensor *af_transpose(af_tensor *x, const int *perm);            /* rank entries */
AF_API af_tensor *af_reshape(af_tensor *x, af_shape s);                   /* one dim may be -1 */
/* size[i] == -1 means "to the end of axis i". */
AF_API af_tensor *af_slice(af_tensor *x, const int64_t *begin, const int64_t *size);
AF_API af_tensor *af_concat(int n, af_tensor *const *xs, int axis);
/* Splits x along axis into n parts of the given sizes (NULL = equal parts); writes n
 * tensors to out. */
AF_API af_status  af_split(af_tensor *x, int axis, int n, const int64_t *sizes, af_tensor **out);

/* Norms. gamma/beta may be NULL (ones/zeros). rms_norm and layer_norm normalize the
 * last axis (gamma/beta [D]); channel_layer_norm normalizes axis 1 of [N,C,...]
 * (gamma/beta [C]); group_norm normalizes `groups` channel groups of [N,C,...]. */
AF_API af_tensor *af_rms_norm(af_tensor *x, af_tensor *gamma, float eps);
AF_API af_tensor *af_layer_norm(af_tensor *x, af_tensor *gamma, af_tensor *beta, float eps);
AF_API af_tensor *af_channel_layer_norm(af_tensor *x, af_tensor *gamma, af_tensor *beta, float eps);
AF_API af_tensor *af_group_norm(af_tensor *x, int groups, af_tensor *gamma, af_tensor *beta, float eps);

/* Pools over the last two axes of [N, C, H, W]; kernel/stride/pad are {h, w}.
 * avg_pool counts padded cells in its divisor (PyTorch's default). */
AF_API af_tensor *af_avg_pool(af_tensor *x, const int kernel[2], const int stride[2], const int pad[2]);
AF_API af_tensor *af_max_pool(af_tensor *x, const int kernel[2], const int stride[2], const int pad[2]);

/* Convolution with a baked weight w [Cout, Cin/groups, kH, kW] on x [N, Cin, H, W].
 * stride/pad/dilation are {h, w}; NULL means {1,1}, {0,0}, {1,1}. */
AF_API af_tensor *af_conv(af_tensor *x, af_tensor *w, const int stride[2], const int pad[2],
                   const int dilation[2], int groups);
/* Transposed convolution, w [Cin, Cout, kH, kW]. */
AF_API af_tensor *af_conv_transpose(af_tensor *x, af_tensor *w, const int stride[2], const int pad[2],
                             const int dilation[2]);
AF_API af_tensor *af_cast(af_tensor *x, af_dtype to);

/* ---------------------------------------------------------------- transformer ops
 * The pieces of a llama2.c-architecture model (src/ir/ops.def, last block). */

/* Token embedding: y[i..., :] = table[ids[i...], :] for a table [V, ...] and ids of any
 * shape holding whole numbers (token ids fed as floats). ids that are a fed input or a
 * constant are flagged exact, so they are never rounded to fp16 (exact to 2^24). An id
 * is truncated toward zero; one outside [0, V) gives a row of zeros. */
AF_API af_tensor *af_embedding(af_tensor *table, af_tensor *ids);
/* The embedding's gradient w.r.t. its table: a [vocab, ...] tensor whose row v is the
 * sum of dy[i..., :] over every i with ids[i...] == v (a scatter-add). */
AF_API af_tensor *af_embedding_grad(af_tensor *dy, af_tensor *ids, int64_t vocab);

/* Rotary position embedding as llama2.c applies it (src/nn/transformer.c): in each
 * head of x [..., seq, heads, head_size] the pair (2i, 2i+1) at sequence index t turns
 * by (offset + t) * theta^(-2i/head_size); offset is the first position (a KV-cache
 * step passes its position), theta 10000 in llama2.c. Built from existing ops. */
AF_API af_tensor *af_rope(af_tensor *x, int64_t offset, float theta);
/* Causal mask on attention scores [..., queries, keys] before softmax: query i (at
 * position offset + i) sees keys 0 .. offset + i; the rest get -1e4 added (finite in
 * fp16, and exp of it is exactly 0 after softmax's max subtraction). */
AF_API af_tensor *af_causal_mask(af_tensor *scores, int64_t offset);
/* Causal softmax attention, softmax(causal_mask(q k^T * scale)) v, for q, k, v of one
 * shape [B, heads, seq, d] (repeat grouped KV heads first); scale 0 means 1/sqrt(d). On
 * a graph targeted at the CPU (af_graph_set_target) it is one node whose kernel skips
 * the masked half, forward and backward; elsewhere the same attention from matmul,
 * af_causal_mask and softmax, which the engines lower. */
AF_API af_tensor *af_causal_attention(af_tensor *q, af_tensor *k, af_tensor *v, float scale);
/* Grouped KV heads: [..., kv_heads, head_size] -> [..., kv_heads * n_rep, head_size],
 * query head h reading kv head h / n_rep (n_rep = n_heads / n_kv_heads, as llama2.c). */
AF_API af_tensor *af_repeat_kv_heads(af_tensor *x, int n_rep);

/* ---------------------------------------------------------------- bridge ops
 * Hardware layers Apple's MIL frontend never emits (src/ir/ops.def, the
 * "bridge ops" blocks). On the CPU they are ordinary kernels; an engine target reaches
 * each through a hand-written net.plist unit, and refuses at compile time what the
 * engine's compiler refuses (the message names the limit and the fix). Index results
 * are whole numbers held as float values: fp16 holds them exactly below 2048, and the
 * engines refuse larger index ranges. docs/bridges.md lists every limit. */

/* Rank. x is [..., C, W]: every channel row of a batch is permuted by the order of row
 * key_lane (0 <= key_lane < C) along W. Ties keep the lower index first (a stable
 * sort). With indices = 0 the result is the permuted x ([..., C, W] for sort,
 * [..., C, k] for top_k); with indices = 1 it is the order itself ([..., W] or
 * [..., k]). top_k keeps the k largest (largest = 1, descending) or smallest (0,
 * ascending) keys; the engines reject k = 3 and k = 4 as the compiler does. */
AF_API af_tensor *af_sort(af_tensor *x, int key_lane, int descending, int indices);
AF_API af_tensor *af_top_k(af_tensor *x, int k, int key_lane, int largest, int indices);
/* x [..., C, H, W]. channel = 0 (spatial): the flattened h * W + w index of each
 * channel's max (max = 1) or min (max = 0), shape [..., C, 1, 1]; channel = 1: the
 * channel index at each position, shape [..., 1, H, W]. The first extreme wins ties. */
AF_API af_tensor *af_arg_min_max(af_tensor *x, int channel, int max);
/* The index of the max (max = 1) or min along axis (W = -1, H = -2, C = -3 on the
 * engines), that axis kept with extent 1. The first extreme wins ties. */
AF_API af_tensor *af_global_arg_min_max(af_tensor *x, int axis, int max);

/* Rearrange, on x [N, C, H, W] with factors fy (along H) and fx (along W); the engines
 * take N = 1 only. pixel_shuffle [N, C*fy*fx, H, W] -> [N, C, H*fy, W*fx] in PyTorch's
 * channel-major order: y[n, c, h*fy + i, w*fx + j] = x[n, (c*fy + i)*fx + j, h, w];
 * pixel_unshuffle is its inverse. channel_to_space / space_to_channel are TensorFlow's
 * depth_to_space / space_to_depth (block-major): y[n, c, h*fy + i, w*fx + j] =
 * x[n, (i*fx + j)*C + c, h, w]. space_to_batch [N, C, H, W] -> [fy*fx*N, C, H/fy, W/fx]
 * with y[(i*fx + j)*N + n, c, h, w] = x[n, c, h*fy + i, w*fx + j] (TensorFlow's order;
 * H and W must divide); batch_to_space is its inverse (the batch must divide by fy*fx). */
AF_API af_tensor *af_pixel_shuffle(af_tensor *x, int fy, int fx);
AF_API af_tensor *af_pixel_unshuffle(af_tensor *x, int fy, int fx);
AF_API af_tensor *af_channel_to_space(af_tensor *x, int fy, int fx);
AF_API af_tensor *af_space_to_channel(af_tensor *x, int fy, int fx);
AF_API af_tensor *af_space_to_batch(af_tensor *x, int fy, int fx);
AF_API af_tensor *af_batch_to_space(af_tensor *x, int fy, int fx);

/* Geometry. cross_product: a x b over the last axis (extent 3) of two equal shapes,
 * numpy.cross. cross_correlation: x [H, W] with tmpl [Th, Tw], valid and not flipped:
 * y[i, j] = sum_{u,v} x[i+u, j+v] tmpl[u, v], [H-Th+1, W-Tw+1]. cost_volume: aux [Wa],
 * ref [Wr] with Wr >= Wa + max_disparity: y[d, x] = |aux[x] - ref[x + d]|, [max_disparity
 * + 1, Wa]. */
AF_API af_tensor *af_cross_product(af_tensor *a, af_tensor *b);
AF_API af_tensor *af_cross_correlation(af_tensor *x, af_tensor *tmpl);
AF_API af_tensor *af_cost_volume(af_tensor *aux, af_tensor *ref, int max_disparity);
/* Furthest point sampling of points [N, 3] in L2 distance: starts at point 0, then
 * repeatedly takes the point whose distance to the chosen set is largest (the lowest
 * index among equal distances). Returns the k chosen points [k, 3] in the order chosen,
 * or with indices = 1 their indices [k]. The engines take k <= 1024 and N <= 8192. */
AF_API af_tensor *af_furthest_point_sampling(af_tensor *points, int k, int indices);
/* Ball-query membership: y[i, j] = 1 when |points[i] - centroids[j]| <= radius (L2),
 * else 0; points [N, 3], centroids [M, 3], y [N, M] (the engine writes it as uint8). */
AF_API af_tensor *af_radius_search(af_tensor *points, af_tensor *centroids, float radius);
/* x[..., s : s + size, ...] along axis, where s is the value of the one-element tensor
 * start read at run time, rounded to the nearest whole number and clamped to [0,
 * extent - size]. The engine accepts only size 2 along the last axis of extent 4. */
AF_API af_tensor *af_dynamic_slice(af_tensor *x, af_tensor *start, int axis, int64_t size);

/* Normalization. lrn: the engine's cross-channel LRN on x [..., C, H, W]: y[c] = x[c] /
 * (k + alpha * sum_{j in win(c)} x[j]^2)^beta, with win(c) = [max(0, c - (C-1)/2),
 * min(C, c + C/2 + 1)) (integer division: only the middle channel sees all C); alpha is
 * the effective coefficient (the unit stores fp16(alpha * C), the hardware divides by
 * C). The engines take C <= 15. local_response_norm is PyTorch's LRN built from fused
 * ops (no cut): y[c] = x[c] / (k + alpha / size * sum_{j = c - size/2}^{c + (size-1)/2}
 * x[j]^2)^beta, zero outside the channels. */
AF_API af_tensor *af_lrn(af_tensor *x, float alpha, float beta, float k);
AF_API af_tensor *af_local_response_norm(af_tensor *x, int size, float alpha, float beta, float k);
/* y = (x - min) / (max - min + eps), min and max over axis -1 (W) or -2 (H) of x; the
 * channel axis is refused, as by the engine's compiler (transpose it to W first). */
AF_API af_tensor *af_minmax_norm(af_tensor *x, int axis, float eps);
/* y = scale * (x OP z) for x and z of one shape. AF_SEW_SUB and AF_SEW_MULT are refused:
 * the compiler rejects Sub and the engine ignores the scale of Mult (use af_sub or
 * af_mul and af_muls). */
typedef enum { AF_SEW_ADD = 0, AF_SEW_SUB = 1, AF_SEW_MULT = 2, AF_SEW_MIN = 3, AF_SEW_MAX = 4 } af_sew_op;
AF_API af_tensor *af_scaled_elementwise(af_tensor *x, af_tensor *z, af_sew_op op, float scale);

/* einsum over n = 1 or 2 operands, NumPy's notation with an explicit "->" (letters
 * a-z and A-Z, no repeated letter within an operand, no "..."): "ij,jk->ik", "bhqd,bhkd->bhqk",
 * "ij->ji", "ij->". The engine's native layer "nchw,nwhu->nchu" (a [N,C,H,W], b [N,W,H,U]
 * -> [N,C,H,U], in any letters of that pattern) becomes one einsum node, which lowers
 * to MIL's einsum (a single hardware layer; not a net.plist bridge); every
 * other equation becomes reduce_sum, transpose, reshape and matmul nodes. g
 * receives the error when an operand is NULL. */
AF_API af_tensor *af_einsum(af_graph *g, const char *equation, int n, af_tensor *const *operands);
/* Bridge ops: native engine layers Apple's MIL frontend never emits. On the
 * CPU they are ordinary kernels; on ane-sim and ane the graph is cut around each one and
 * it runs as its own net.plist program (af_stats.segments counts the programs).
 *
 * af_sdpa: softmax(q k^T * scale + mask) v for q [B, heads, Sq, d], k [B, heads, Skv, d],
 * v [B, heads, Skv, dv] -> [B, heads, Sq, dv]; mask NULL or additive [Sq, 1, Skv]
 * (shared by batch and heads); scale 0 means 1/sqrt(d). Sq != Skv is KV-cache decoding.
 * The native layer is used within its reliability bounds, max(Sq, Skv) <=
 * AF_SDPA_NATIVE_MAX_SEQ and min(Sq, Skv) < AF_SDPA_NATIVE_MIN_BOTH; outside them the
 * same attention is built from ordinary ops (matmul, softmax). */
#define AF_SDPA_NATIVE_MAX_SEQ 2048
#define AF_SDPA_NATIVE_MIN_BOTH 512
AF_API af_tensor *af_sdpa(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *mask, float scale);
/* The values of x as one vector [count(x)] (row-major order). */
AF_API af_tensor *af_flatten(af_tensor *x);
/* Inference-time dropout: the identity. Only rate 0 is accepted (the engine layer has
 * no training mode); other rates are refused with a message. */
AF_API af_tensor *af_dropout(af_tensor *x, float rate);
/* x with its length-1 axis `axis` repeated `size` times. */
AF_API af_tensor *af_broadcast(af_tensor *x, int axis, int64_t size);
/* The contiguous view [offset, offset + size) of x's values flattened: [size]. */
AF_API af_tensor *af_input_view(af_tensor *x, int64_t offset, int64_t size);

/* ---------------------------------------------------------------- autograd
 * Reverse mode over the graph: af_backward adds gradient nodes built from the same
 * ops, so gradients compile and run like any other node. */

typedef struct af_loss af_loss; /* owned by the graph of its tensors: never freed by the caller */

/* Any scalar tensor (one element) as a loss. */
AF_API af_loss   *af_loss_scalar(af_tensor *scalar);
/* Mean softmax cross-entropy of logits [N, C] against one-hot targets [N, C]. Its
 * backward seed is the analytic (softmax(logits) - target) * (loss_scale / N). */
AF_API af_loss   *af_softmax_cross_entropy(af_tensor *logits, af_tensor *onehot);
/* Mean squared error over every element. */
AF_API af_loss   *af_mse(af_tensor *pred, af_tensor *target);
/* The scalar loss value as a tensor (built on first use). */
AF_API af_tensor *af_loss_value(af_loss *loss);
/* The tensor the backward pass starts from (the scalar, or the logits for CE). */
AF_API af_tensor *af_loss_root(af_loss *loss);

typedef struct {
    float loss_scale;         /* dL/dloss; 0 means 1 */
    int nstop;                /* detach frontier: gradient reaches these tensors but */
    af_tensor *const *stop;   /* does not flow past them; default: the params */
} af_backward_opts;

/* Writes to grads[i] the gradient of the loss with respect to params[i] (same shape;
 * a tensor of zeros when the loss does not depend on it; like every node, it belongs to
 * the graph). opts may be NULL. */
AF_API af_status af_backward(af_loss *loss, int n, af_tensor *const *params, af_tensor **grads,
                      const af_backward_opts *opts);
/* The same from an explicit seed (the gradient arriving at root, root's shape), with
 * the same options as af_backward: the seed is multiplied by loss_scale (0 means 1, and
 * then no node is added), stop is the detach frontier (default: the params). opts may
 * be NULL. */
AF_API af_status af_backward_from(af_tensor *seed, af_tensor *root, int n, af_tensor *const *params,
                                  af_tensor **grads, const af_backward_opts *opts);
/* 1 when op (an af_op_name index) has a VJP rule or needs none (leaves, comparisons). */
AF_API int        af_op_has_vjp(int op);

/* ---------------------------------------------------------------- layers (src/nn) */

/* y = x @ w^T + b with x [..., K], w [N, K] (PyTorch layout), b [N] or NULL. */
AF_API af_tensor *af_linear(af_tensor *x, af_tensor *w, af_tensor *b);
/* A trainable conv weight from PyTorch layout [Cout, Cin, kH, kW] (init may be NULL),
 * stored as the patch matrix [Cin*kH*kW, Cout] with row order ci*(kH*kW) + u*kW + v. */
AF_API af_tensor *af_conv_param(af_graph *g, const char *name, int cout, int cin, int kh, int kw, const float *init);
/* Convolution with a trainable weight from af_conv_param, built from im2col
 * (slice_by_size + concat, patch index on axis 2) and a broadcast matmul; stride must
 * be 1 (downsample with avg_pool); pad >= 0 zero-pads inside the graph. x [N,Cin,H,W]. */
AF_API af_tensor *af_conv2d(af_tensor *x, af_tensor *w, int stride, int pad);
/* Multi-head self-attention on x [B, T, D] with weights [D, D] (PyTorch layout) and
 * optional biases [D] (NULL for none); causal masks future positions. */
AF_API af_tensor *af_mha(af_tensor *x, int heads, af_tensor *wq, af_tensor *wk, af_tensor *wv, af_tensor *wo,
                  af_tensor *bq, af_tensor *bk, af_tensor *bv, af_tensor *bo, int causal);

/* ---------------------------------------------------------------- targets and families
 * Where a model runs (af_compile_opts.target) and, on the engine targets, which Neural
 * Engine family it is compiled for. */

typedef enum { AF_TARGET_CPU = 0, AF_TARGET_ANE_SIM = 1, AF_TARGET_ANE = 2 } af_target;
/* AF_PRECISION_BF16 (CPU target only): matmuls and convolutions (forward and both
 * gradients) take bf16-rounded operands and accumulate in fp32 on AMX or AVX512-BF16;
 * everything else, the weights and the optimizer's state stay fp32 (as PyTorch's
 * autocast). On a CPU without either, af_compile refuses it (AF_ERR_UNSUPPORTED, naming
 * the CPU and the fix: AF_PRECISION_FP32). */
typedef enum { AF_PRECISION_DEFAULT = 0, AF_PRECISION_FP32 = 1, AF_PRECISION_FP16 = 2, AF_PRECISION_BF16 = 3 } af_precision;

/* Neural Engine families (the ane-sim target reproduces each one's rules). */
typedef enum {
    AF_FAMILY_DEFAULT = 0, /* the hardware's, else A16 */
    AF_FAMILY_A13 = 13,    /* M1 */
    AF_FAMILY_A14 = 14,    /* M2 */
    AF_FAMILY_A15 = 15,    /* M3 */
    AF_FAMILY_A16 = 16     /* M4, M5 */
} af_family_id;

/* Parses "cpu", "ane-sim", "ane-sim:FAM" or "ane[:FAM]", FAM one of m1..m5 or a13..a16
 * (case-insensitive; m4 and m5 are A16). *fam is AF_FAMILY_DEFAULT when the spec names
 * no family. Either out pointer may be NULL. (The CLI reads $ANEFORGE_TARGET with it.) */
AF_API af_status    af_target_parse(const char *spec, af_target *t, af_family_id *fam);
/* The family fam stands for: itself, or for AF_FAMILY_DEFAULT the family in
 * the hardware's (Apple Silicon), else A16. */
AF_API af_status    af_family_resolve(af_family_id fam, af_family_id *out);
AF_API const char  *af_family_name_of(af_family_id fam);        /* "A13".."A16" (DEFAULT resolved), "?" */

/* ---------------------------------------------------------------- compile and run */


enum { AF_DEFAULT = 0, AF_ON = 1, AF_OFF = -1 }; /* the three values of an on/off switch */
typedef struct {
    af_target target;       /* default CPU */
    af_precision precision; /* default: fp32 on CPU, fp16 on ANE targets */
    int threads;            /* 0 = one per core */
    af_family_id family;    /* ANE targets only */
    /* On/off switches are ints with three values, so that a zeroed struct means the
     * defaults: AF_DEFAULT (0), AF_ON (1) or AF_OFF (-1). */
    int via_mil;            /* ane-sim: AF_ON runs the program as the engine would receive
                             * it (emitted to MIL text + weights, parsed back, executed);
                             * default off (the CLI sets AF_ON for $ANEFORGE_SIM_VIA_MIL=1) */
    int precision_check;    /* ane-sim: the run-time check that flags a user subtraction of
                             * near-equal values (af_ane_precision_flags); default on,
                             * AF_OFF turns it off */
    struct af_sim_engine *sim_engine; /* ane-sim: the simulated engine whose program cache
                                       * and compile budget it uses; NULL = the default */
    const char *ane_framework; /* AF_TARGET_ANE: the AppleNeuralEngine framework binary to
                                * load; NULL = the system's (on Linux, a fake built with
                                * the tests: see docs/fake-ane.md) */
} af_compile_opts;

/* What running a model cost, accumulated over its runs (reset with af_model_stats_reset). */
typedef struct {
    int64_t compiles;     /* engine programs compiled for this model (cache misses) */
    int64_t dispatches;   /* program executions */
    int64_t bytes_in;     /* host -> engine bytes */
    int64_t bytes_out;    /* engine -> host bytes */
    int64_t engine_flops; /* floating-point operations inside programs */
    int64_t host_flops;   /* floating-point operations done on the host */
    int64_t segments;     /* programs one run executes: 1, or on engine targets a graph with
                           * bridge ops cut into fused regions and bridge programs (set by
                           * af_model_stats, not accumulated) */
    int64_t segment_bytes;/* bytes the host handed from one segment to the next (fp16 on
                           * engine targets) */
} af_stats;
AF_API void af_model_stats(const af_model *m, af_stats *out);
AF_API void af_model_stats_reset(af_model *m);

/* Tells builders the graph's target so composites can pick that target's fastest
 * construction: on AF_TARGET_CPU, af_conv2d becomes one native conv node (input
 * gradient by conv_transpose, weight gradient by one matmul against im2col patches)
 * instead of the im2col graph every target compiles. Graphs that are not told build
 * the portable form; trainers tell their graph. */
AF_API void af_graph_set_target(af_graph *g, af_target target);

/* What a target is, as its backend declares it: "cpu", "ane-sim", "ane" ("?" for none);
 * whether it computes as the Neural Engine does (fp16 storage, an engine family, the
 * engine's limits); and whether opts compile for fp16 storage (AF_PRECISION_FP16, or
 * AF_PRECISION_DEFAULT on a target that is fp16 by default). */
AF_API const char *af_target_name(af_target t);
AF_API int         af_target_is_engine(af_target t);
AF_API int         af_compile_opts_fp16(const af_compile_opts *opts);

/* Compiles the part of g that computes `out` from `in`. Every input, parameter or
 * other leaf that the outputs depend on must be listed in `in` (constants are baked).
 * Returns NULL on error (af_error_message says why). The caller frees the model with
 * af_model_free. The model copies the constants' values (rounded to fp16 in fp16
 * models) and holds a reference to g, so g may be freed (af_graph_free) before the
 * model; the model does not keep in/out or opts, and caller buffers are only read or
 * written during af_run. */
AF_API af_model *af_compile(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                     const af_compile_opts *opts);

/* A caller-owned host buffer: `count` elements of `dtype` (fp32 floats or fp16 bits). */
typedef struct { void *data; af_dtype dtype; int64_t count; } af_buffer;
#ifndef __cplusplus
#define AF_BUF_F32(ptr, n) ((af_buffer){ (void *)(ptr), AF_F32, (int64_t)(n) })
#else
#define AF_BUF_F32(ptr, n) (af_buffer{ (void *)(ptr), AF_F32, (int64_t)(n) })
#endif

/* Runs the model: in[i] feeds the i-th compiled input, out[i] receives the i-th
 * output. Buffers are checked against the compiled shapes; an output buffer with NULL
 * data is not delivered (useful for outputs bound as resident state). */
AF_API af_status af_run(af_model *m, const af_buffer *in, af_buffer *out);
/* Resident state: after every run the model copies output `out_index` onto input
 * `in_index` internally, so that input keeps its value across runs without the host
 * feeding it (its af_buffer in af_run is ignored). Within a run every node reads the
 * pre-run value; the copy happens last. The state starts as `init` (count(shape) floats,
 * copied: like read_state's dst and write_state's src, the caller keeps ownership). */
AF_API af_status af_model_bind_state(af_model *m, int in_index, int out_index, const float *init);
AF_API af_status af_model_read_state(const af_model *m, int in_index, float *dst);
AF_API af_status af_model_write_state(af_model *m, int in_index, const float *src);
AF_API int       af_model_num_nodes(const af_model *m);     /* ops it executes per run */
AF_API size_t    af_model_arena_bytes(const af_model *m);   /* intermediate memory it holds */
AF_API void      af_model_free(af_model *m);

/* ---------------------------------------------------------------- training (src/train)
 * A trainer compiles forward, backward and the optimizer update into programs; the host
 * feeds minibatches and a learning rate. The model is given as code (af_net) so the
 * trainer can build it as often as its plan needs: per program, per unrolled step, and
 * once more for the evaluation program. */

typedef struct af_trainer af_trainer;

typedef struct {
    void *ctx;
    /* Creates the model's parameters in g (with af_parameter / af_conv_param) in a fixed
     * order, writes them to params (at most max) and returns how many, or -1. */
    int (*make_params)(void *ctx, af_graph *g, af_tensor **params, int max);
    /* Builds the output [B, out_dim] from a batch x [B, sample...] and the current
     * weights (the params, or their updated values inside an unrolled program). */
    af_tensor *(*forward)(void *ctx, af_tensor *x, af_tensor *const *weights);
    af_shape sample;   /* one input sample, e.g. [784] or [1, 28, 28] */
    int64_t out_dim;   /* classes (cross-entropy) or regression targets (mse) */
    /* AF_OBJ_CUSTOM only: builds the loss from the forward output [B, out_dim] and the
     * fed target [B, out_dim] with any ops, returning af_loss_scalar(a one-element
     * tensor) or af_softmax_cross_entropy / af_mse; NULL on failure. The trainer seeds
     * its backward with the (fed) loss scale and reports its value as the step's loss. */
    af_loss *(*loss)(void *ctx, af_tensor *output, af_tensor *target);
    /* What the net declares beyond forward, for the plans that need more (NULL for other
     * nets): af_net_llama points it at its af_llama_config, which the pipeline plan and
     * the resident plan's llama variant build from (read inside af_trainer_new only). */
    const void *llama_config;
} af_net;

/* CE: softmax cross-entropy on one-hot targets; MSE: mean squared error; CUSTOM: the
 * net's loss function. */
typedef enum { AF_OBJ_CE = 0, AF_OBJ_MSE = 1, AF_OBJ_CUSTOM = 2 } af_objective;
typedef enum { AF_OPT_ADAM = 0, AF_OPT_SGD = 1 } af_optimizer;
typedef enum { AF_LR_CONSTANT = 0, AF_LR_COSINE = 1 } af_lr_schedule;
typedef enum {
    AF_PLAN_HOST = 0,     /* forward+backward compiled; optimizer in fp32 on the host */
    AF_PLAN_DEVICE = 1,   /* per-param update programs; state shuttled by the host */
    AF_PLAN_RESIDENT = 2, /* one program per step; params and moments stay in the backend */
    AF_PLAN_UNROLLED = 3, /* K steps unrolled into one resident program */
    AF_PLAN_PIPELINE = 4  /* af_net_llama only: six kernels per layer (the attention and FFN
                           * halves, forward and backward), compiled once with
                           * weights as inputs; embedding, RMSNorm backward, dW and Adam on the host */
} af_plan;

typedef struct {
    af_objective objective;
    af_optimizer optimizer;
    float lr;                /* peak learning rate */
    float beta1, beta2, eps; /* Adam */
    float weight_decay;      /* decoupled (AdamW-style); 0 = off */
    af_lr_schedule schedule;
    int64_t warmup_steps;    /* linear warmup (cosine schedule) */
    int64_t total_steps;     /* cosine decays to min_lr_ratio * lr at this step */
    float min_lr_ratio;
    float loss_scale;        /* gradients are computed scaled by this; 0 = 1 */
    int dynamic_loss_scale;  /* halve on overflow, double after scale_growth_interval clean steps */
    int scale_growth_interval;
    af_plan plan;
    int unroll;              /* K for AF_PLAN_UNROLLED (default 8) */
    int shuttle_state;       /* AF_PLAN_UNROLLED (and AF_PLAN_RESIDENT, its K = 1 case): 1 feeds
                              * params and moments in and reads them
                              * back around every K-step block;
                              * 0 keeps them resident in the program (default) */
    int batch;               /* minibatch size (default 128) */
    int eval_batch;          /* batch of the evaluation program (default 500) */
    af_compile_opts compile;
    /* The host and pipeline plans (the optimizer runs on the host there; the others
     * refuse these): */
    float grad_clip;         /* clip the gradient's global L2 norm (over all params) to this
                              * before the update, as llama2.c's train.py does; 0 = off */
    int grad_accum;          /* batches per optimizer step, their gradients averaged
                              * (llama2.c's gradient_accumulation_steps); 0 or 1 = one */
} af_train_opts;

AF_API af_train_opts af_train_defaults(void);

/* Built-in models (built only from the public API; see examples/). The returned net's
 * ctx is owned by the caller: release it with af_net_free, any time after
 * af_trainer_new has returned (trainers never use a net afterwards). Initial weights
 * are drawn like PyTorch's defaults from a generator seeded with `seed`.
 *   mlp  784-128-10 with ReLU (any sample shape: it is flattened)
 *   cnn  conv3x3(C->16, pad 1), ReLU, avg_pool 2, conv3x3(16->32, pad 1), ReLU,
 *        avg_pool 2, linear -> classes; sample [C, H, W] with H, W divisible by 4 */
AF_API af_net af_net_mlp(af_shape sample, int hidden, int classes, uint64_t seed);
AF_API af_net af_net_cnn(af_shape sample, int classes, uint64_t seed);
/* Standardises inputs inside the graph, (x - mean) / std, so it runs on the engine. */
AF_API void   af_net_set_input_norm(af_net *net, float mean, float std);
AF_API void   af_net_free(af_net *net);

/* Where a step's loss and accuracy were computed. */
typedef enum {
    AF_METRIC_HOST_FP32 = 0,  /* on the host in fp32 from the logits the programs return
                               * (host and device plans, CE and MSE) */
    AF_METRIC_GRAPH_FP32 = 1, /* inside the program, fp32 numerics */
    AF_METRIC_GRAPH_FP16 = 2  /* inside the program, fp16 numerics (resident and unrolled
                               * plans on engine targets or in fp16; custom losses) */
} af_metric_source;
AF_API const char *af_metric_source_name(af_metric_source s); /* "host_fp32", "graph_fp32", "graph_fp16" */

/* Per-step report: what the step did and what it cost. A step is skipped (all state
 * left bit-identical) when a gradient or any updated weight or moment is inf or nan. */
typedef struct {
    int64_t step;            /* optimizer steps taken so far (skipped ones excluded) */
    int64_t skipped;         /* steps skipped, in total */
    int64_t skipped_consecutive; /* skips since the last step that was taken */
    int skipped_now;         /* steps skipped in this call */
    double loss;             /* mean loss of the batch (of the K batches when unrolled) */
    double accuracy;         /* fraction correct (cross-entropy only) */
    af_metric_source metric_source; /* where loss and accuracy were computed */
    float lr;                /* learning rate used by the last step */
    float loss_scale;        /* the scale used by the last step */
    af_stats stats;          /* programs compiled, dispatches, bytes, FLOPs of this call */
    float grad_norm;         /* the step's gradient L2 norm before clipping (grad_clip > 0 only) */
} af_step_info;

/* A step skipped for non-finite values warns through the log (af_set_log) the first time and every 100th
 * time; AF_SKIP_WARN_CONSECUTIVE consecutive skips warn that the loss scale is too large
 * (with a dynamic scale: that it is already 1, so the non-finite values come from
 * elsewhere: the data, the learning rate). */
#define AF_SKIP_WARN_CONSECUTIVE 3

/* A trainer, freed with af_trainer_free. It calls net's functions only inside
 * af_trainer_new (the evaluation graph is built there too and compiled on first use),
 * and copies *net and *opts: both, and net->ctx, may be freed as soon as it returns. It
 * owns its graph, programs, weights and optimizer state; af_trainer_param's tensors
 * belong to it. */
AF_API af_trainer *af_trainer_new(const af_net *net, const af_train_opts *opts);
AF_API void        af_trainer_free(af_trainer *t);
/* Steps per call: 1, or K for the unrolled plan. Batches per call: steps per call times
 * grad_accum. x holds that many batches back to back ([batches * batch, sample...]);
 * target the one-hot rows (CE) or values (MSE). */
AF_API int         af_trainer_steps_per_call(const af_trainer *t);
AF_API int         af_trainer_batches_per_call(const af_trainer *t);
AF_API af_status   af_trainer_step(af_trainer *t, const float *x, const float *target, af_step_info *info);
/* Runs the evaluation program (its own weight inputs, fed the current masters) on n
 * samples; out gets [n, out_dim]. */
AF_API af_status   af_trainer_predict(af_trainer *t, int64_t n, const float *x, float *out);
AF_API int         af_trainer_num_params(const af_trainer *t);
/* The engine family the trainer's programs are compiled for, resolved once at creation
 * (af_compile_family); AF_FAMILY_DEFAULT on the cpu target. */
AF_API af_family_id af_trainer_family(const af_trainer *t);
/* Param i of the trainer's graph. Its af_tensor_value is the trainer's host copy of the
 * weights (held once): the host optimizer updates it in place, plans with resident state
 * only on demand, so read current values with af_trainer_read_param. Values written
 * there between steps are what the host optimizer's next step trains from; it never
 * stores a weight that is not finite (where the update of a written weight would
 * overflow, the weight is kept). */
AF_API af_tensor  *af_trainer_param(const af_trainer *t, int i);
/* Current values of param i (reads resident state back when needed). */
AF_API af_status   af_trainer_read_param(af_trainer *t, int i, float *dst);
/* Checkpoint of weights, optimizer state, step and loss scale (atomic, checksummed). */
AF_API af_status   af_trainer_save(af_trainer *t, const char *path);
AF_API af_status   af_trainer_load(af_trainer *t, const char *path);
/* Costs accumulated over all steps so far (compiles include the initial ones). */
AF_API void        af_trainer_stats(const af_trainer *t, af_stats *out);
/* Where the trainer's wall time went, in seconds over all calls so far:
 * AF_PHASE_STEP the step programs (forward and backward; on the resident and unrolled
 * plans the one step program, optimizer included), AF_PHASE_OPTIMIZER the update (host
 * update or update programs), AF_PHASE_COMPILE compiling. */
enum { AF_PHASE_STEP = 0, AF_PHASE_OPTIMIZER = 1, AF_PHASE_COMPILE = 2, AF_NPHASES = 3 };
AF_API void        af_trainer_phase_seconds(const af_trainer *t, double out[AF_NPHASES]);
/* The loss scale the next step uses (the dynamic scale as it stands). */
AF_API float       af_trainer_loss_scale(const af_trainer *t);
/* Where this trainer's steps compute loss and accuracy (af_step_info.metric_source). */
AF_API af_metric_source af_trainer_metric_source(const af_trainer *t);

/* Checkpoints with records of the caller's own. af_trainer_save writes the trainer's
 * records (weights, optimizer state, step, loss scale) as one checkpoint file: named
 * records, checksummed, written whole or not at all. To keep records of its own beside
 * them (where its data loader stands, its generator's state), an application builds the
 * checkpoint itself: af_checkpoint_new, af_trainer_export, its own records under a
 * prefix of its own (e.g. "app."), af_checkpoint_save; and back: af_checkpoint_load, its
 * records, af_trainer_import. Files are untrusted: loading checks the checksum and every
 * record's bounds, and import checks every array against the trainer's shapes. */
typedef struct af_checkpoint af_checkpoint;
AF_API af_checkpoint *af_checkpoint_new(void);                    /* NULL when out of memory */
AF_API void        af_checkpoint_free(af_checkpoint *c);          /* NULL is fine */
AF_API af_status   af_checkpoint_save(const af_checkpoint *c, const char *path);
AF_API af_status   af_checkpoint_load(const char *path, af_checkpoint **out); /* *out: free with af_checkpoint_free */
/* Records: a name (a non-empty string of at most 255 bytes, unique in the checkpoint)
 * and bytes, copied. */
AF_API af_status   af_checkpoint_put(af_checkpoint *c, const char *name, const void *data, int64_t bytes);
AF_API af_status   af_checkpoint_put_i64(af_checkpoint *c, const char *name, int64_t v);
AF_API af_status   af_checkpoint_put_str(af_checkpoint *c, const char *name, const char *s);
/* A record's bytes (owned by c; *bytes, may be NULL, gets their count), or NULL with
 * the error set when c has none by that name. */
AF_API const void *af_checkpoint_get(const af_checkpoint *c, const char *name, int64_t *bytes);
/* AF_ERR_CORRUPT naming the record when it is missing or not one int64. */
AF_API af_status   af_checkpoint_get_i64(const af_checkpoint *c, const char *name, int64_t *v);
/* A string record (owned by c), or NULL when missing or not a string. */
AF_API const char *af_checkpoint_get_str(const af_checkpoint *c, const char *name);
/* The trainer's records into c / its state from c's records (what af_trainer_save and
 * af_trainer_load write and read). */
AF_API af_status   af_trainer_export(af_trainer *t, af_checkpoint *c);
AF_API af_status   af_trainer_import(af_trainer *t, const af_checkpoint *c);

/* The plans by name, as the library's registry lists them: af_plan_name spells one
 * ("host", "device", ...; "?" for no plan); af_plan_parse reads one into *out, or
 * returns AF_ERR_INVALID naming the plans there are. */
AF_API const char *af_plan_name(af_plan p);
AF_API af_status   af_plan_parse(const char *name, af_plan *out);
/* What a plan is, before any trainer exists: the steps one af_trainer_step call runs
 * under opts (opts->unroll on the unrolled plan, else 1; 0 for no plan), and whether its
 * optimizer runs on the host in fp32, where grad_clip and grad_accum apply (1 or 0). */
AF_API int         af_plan_steps_per_call(const af_train_opts *opts);
AF_API int         af_plan_host_optimizer(af_plan p);

/* Data-parallel training (src/train/dist.c, docs/distributed.md). Each of N processes
 * (ranks) runs its own trainer on its own shard of every global batch. A host-optimizer
 * plan (host, pipeline) averages the gradients over the ranks before every optimizer
 * step, so N ranks with batch B take the steps one process takes with batch N x B; the
 * in-program plans (device, resident, unrolled) average parameters and optimizer state
 * every sync_every steps (local SGD). Calls that take a dist are collective: every rank
 * makes them, in the same order. */
typedef struct af_dist af_dist;
typedef enum { AF_DIST_SUM = 0, AF_DIST_MIN = 1, AF_DIST_MAX = 2 } af_dist_op;
/* Joins the MPI job this process was started in (mpirun; MPI_Init unless done already).
 * A peer silent for timeout_s seconds (0 = 120) fails the call that waits on it instead
 * of hanging. NULL with AF_ERR_UNSUPPORTED when the library was built without MPI. */
AF_API af_dist  *af_dist_mpi(double timeout_s);
AF_API int       af_dist_rank(const af_dist *d); /* 0 .. size - 1; 0 for NULL */
AF_API int       af_dist_size(const af_dist *d); /* 1 for NULL */
/* n doubles combined over the ranks in place; every rank gets the result. */
AF_API af_status af_dist_allreduce(af_dist *d, double *v, int n, af_dist_op op);
/* Bytes this rank has all-reduced and seconds it has spent communicating, all calls. */
AF_API void      af_dist_stats(const af_dist *d, int64_t *bytes, double *seconds);
AF_API void      af_dist_abort(af_dist *d, int code); /* ends every rank (MPI_Abort) */
AF_API void      af_dist_free(af_dist *d);            /* leaves the job (MPI_Finalize) */
/* Trains t over d (d outlives t; NULL: alone again): rank 0's parameters and optimizer
 * state are broadcast now so every rank starts equal, then averaged as above
 * (sync_every >= 1 matters to the in-program plans only). Rank r feeds rows
 * [r B, (r + 1) B) of each global batch. */
AF_API af_status af_trainer_set_dist(af_trainer *t, af_dist *d, int sync_every);
/* Averages parameters and optimizer state over the ranks now (the in-program plans'
 * ranks drift between syncs), e.g. before rank 0 saves a checkpoint. */
AF_API af_status af_trainer_dist_sync(af_trainer *t);

/* ---------------------------------------------------------------- optimizer graphs
 * Adam as graph ops, for building updates inside programs (e.g. K unrolled steps: feed
 * each step's new weights to the next step's forward). The second moment is kept as its
 * square root, r = sqrt(v): r' = sqrt(b2 r^2 + (1-b2) g^2) is computed as
 * s sqrt(b2 (r/s)^2 + (1-b2) (g/s)^2) with s = max(r, |g|), so r' <= max(r, |g|) and
 * m' <= max(|m|, |g|): in fp16 neither can overflow while the gradients are finite
 * (v itself would overflow once |g| > 256). Start m and r at zero. */
typedef struct {
    float beta1, beta2; /* 0 <= beta < 1, e.g. 0.9 and 0.999 */
    float eps;          /* added to r, in the gradient's units; baked (fp16 rounds it) */
} af_adam_opts;

/* For each of the n params: m' = b1 m + (1-b1) grad, r' as above,
 * w' = decay w - lr_t m' / (r' + eps). w[i], grad[i], m[i], r[i] share a shape; lr_t
 * (and decay, NULL for none) are one-element tensors, usually fed inputs so they can
 * change per step without a recompile: lr_t = af_adam_lr_t(lr, b1, b2, t) folds in the
 * bias correction, decay = 1 - lr * weight_decay. Writes the new tensors (same shapes)
 * to w_new, m_new, r_new; a conv weight's facts (af_conv_param) carry over to w_new so
 * it still works in af_conv2d. The nodes are built in lr_t's graph. */
AF_API af_status af_adam_step(int n, af_tensor *const *w, af_tensor *const *grad, af_tensor *const *m, af_tensor *const *r,
                       af_tensor *lr_t, af_tensor *decay, const af_adam_opts *opts, af_tensor **w_new, af_tensor **m_new,
                       af_tensor **r_new);
/* lr sqrt(1 - beta2^t) / (1 - beta1^t): the learning rate of Adam step t (from 1) with
 * its bias correction folded in. */
AF_API float af_adam_lr_t(float lr, float beta1, float beta2, int64_t t);

/* ---------------------------------------------------------------- the Neural Engine runtime (src/ane/darwin)
 * Diagnostics for AF_TARGET_ANE (what `aneforge doctor` checks): which framework is
 * loaded, what the machine says about its engine, and the compile budget. A model on
 * the ane target loads the framework by itself (af_compile_opts.ane_framework). */

/* The AppleNeuralEngine framework binary loaded when none is named. */
AF_API const char *af_ane_system_framework(void);
/* Loads the framework (path, or NULL for the system's) once per process; a failure
 * names the path and why it would not load (missing, not macOS, a symbol it lacks). */
AF_API af_status af_ane_open(const char *framework_path);
typedef struct {
    char chip[128];           /* the CPU brand ("Apple M1 Pro"); "" where there is none */
    char model[64];           /* the machine model ("MacBookPro18,3"); "" where there is none */
    char subtype[32];         /* the engine's subtype ("h13", "h16"); "" when unknown or before af_ane_open */
    af_family_id family;      /* from the subtype, else from the chip; AF_FAMILY_DEFAULT if neither tells */
    const char *family_chips; /* the chips of that family ("M1"), or NULL when the family is unknown */
    int64_t compiles;         /* real compiles in this process so far */
    int64_t compile_budget;   /* the most this process compiles before refusing (below the daemon's limit) */
    const char *compile_entry; /* the compile entry point used ("-[_ANEInMemoryModel compileWithQoS:options:error:]",
                                * or the _ANEClient one where this macOS lacks it or it fails); NULL before af_ane_open */
} af_ane_device;
/* Fills *out. Works without af_ane_open (subtype then stays ""). */
AF_API af_status af_ane_device_info(af_ane_device *out);

/* ---------------------------------------------------------------- the CPU backend's machine (src/cpu)
 * What the CPU backend found on this machine, and its GEMM and thread pool called
 * directly: for benchmarks that compare the executor with the machine's peak, and for
 * bug reports (`aneforge --version`). */
typedef struct {
    const char *model;       /* the CPU's model name, or "unknown" */
    const char *features;    /* the vector features present, space-separated ("avx512f avx2 fma"), or "none" */
    int cores;               /* what "one thread per core" means here */
    const char *gemm_path;   /* what a product runs on: "avx512", "avx2", "neon", "portable", "accelerate"
                              * or "openblas" with the core it picked ("openblas Cooperlake") */
    const char *gemm_kernel; /* the packed micro-kernel chosen from the CPU's features */
    int gemm_mr, gemm_nr;    /* its register tile, rows x columns */
    const char *blas;        /* the BLAS library this build may send products to ("openblas",
                              * "accelerate"), or NULL */
    int blas_available;      /* 1 when that library is present (OpenBLAS is opened at run time) */
} af_cpu_info;
/* Fills *out; the strings are the library's, valid for the program's life. */
AF_API void af_cpu_info_get(af_cpu_info *out);

/* A pool of worker threads (threads <= 0: one per core); NULL when out of memory. */
typedef struct af_thread_pool af_thread_pool;
typedef void (*af_range_fn)(void *ctx, int64_t begin, int64_t end);
AF_API af_thread_pool *af_thread_pool_new(int threads);
AF_API void af_thread_pool_free(af_thread_pool *p); /* NULL is fine */
/* Splits [0, n) into ranges of at least min_chunk and runs fn on them over the pool (on
 * the calling thread alone when p is NULL); returns when all are done. */
AF_API void af_thread_pool_for(af_thread_pool *p, int64_t n, int64_t min_chunk, af_range_fn fn, void *ctx);

/* Row-major C = alpha * op(A) @ op(B) + beta * C, op(A) [M, K], op(B) [K, N], C [M, N],
 * op transposing when ta / tb is set, split over p (NULL: the calling thread).
 * AF_GEMM_KERNEL runs the packed micro-kernel af_cpu_info names; AF_GEMM_BLAS the linked
 * BLAS (AF_ERR_UNSUPPORTED when there is none or the sizes exceed its ints). */
typedef enum { AF_GEMM_KERNEL = 0, AF_GEMM_BLAS = 1 } af_gemm_impl;
AF_API af_status af_sgemm(af_gemm_impl impl, af_thread_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                          float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                          int64_t ldc);
/* Tells the BLAS library how many threads to use (nothing without one); af_compile sets
 * it from af_compile_opts.threads. */
AF_API void af_blas_set_threads(int threads);

/* ---------------------------------------------------------------- fp16 helpers */

AF_API uint16_t af_f32_to_f16(float f);   /* round to nearest even; overflow gives +-inf */
AF_API float    af_f16_to_f32(uint16_t h);
AF_API float    af_round_f16(float f);    /* f rounded to the nearest fp16 value */

/* ---------------------------------------------------------------- op table */

AF_API int         af_op_count(void);
AF_API const char *af_op_name(int op);

/* One op-table row as `aneforge op NAME --help` and `aneforge ops --json` show it. All
 * strings are the library's own, valid for the program's life. */
#define AF_OP_MAX_ATTRS 8
typedef struct {
    const char *key;     /* the attribute's name */
    const char *type;    /* how its value is written: "int", "ints" (comma-separated),
                          * "h,w", "number", "fp16|fp32" or "add|min|max" */
    const char *value;   /* the value it takes when not given; "" = 0 */
    const char *help;
} af_op_attr;
typedef struct {
    const char *name;
    const char *kind;    /* the op kind: binary, unary, layout, rank, ... */
    const char *mil;     /* the MIL ops it lowers to, or how it runs on the engines */
    int arity;           /* number of sources; -1: variadic */
    const char *ports;   /* the sources' names, comma-separated; a variadic op's last one
                          * is "x*" (x0, x1, ...) or an optional "mask?" */
    int leaf;            /* an input or a constant, not an op to run */
    int bridge;          /* a net.plist bridge op (its own program on the engines) */
    int cpu_only;        /* a native CPU kernel the engine targets refuse */
    int nattrs;
    af_op_attr attrs[AF_OP_MAX_ATTRS];
} af_op_desc;
/* Fills *out with row op (0 .. af_op_count() - 1); AF_ERR_INVALID for another op. */
AF_API af_status   af_op_info(int op, af_op_desc *out);
/* The row called name, or -1. */
AF_API int         af_op_find(const char *name);
/* The name of op's source k, as af_op_desc.ports spells it: a variadic op's last port
 * numbered ("x0", "x1", ...), an optional one without its "?". Written to buf (n bytes);
 * NULL when op has no source k. */
AF_API const char *af_op_port(int op, int k, char *buf, size_t n);
/* Builds one node of op (not a leaf) in the sources' graph from nsrc sources and
 * attributes written as text, each "key=value" in the type af_op_desc gives it (lists
 * comma-separated; the rest take their defaults), with the op's builder's own defaults
 * (af_sdpa's scale 0 = 1/sqrt(d), af_dynamic_slice's start read exactly). A bad
 * attribute (unknown key, value not of its type) is AF_ERR_INVALID with *bad_attr (may
 * be NULL) set to its index and the message saying why; a node the builder refuses (a
 * shape, a source count) is AF_ERR_INVALID with the graph's error (af_graph_error) as the
 * message, *bad_attr -1. *out is the node, or NULL. */
AF_API af_status   af_op_build(int op, int nsrc, af_tensor *const *src, int nattrs, const char *const *attrs,
                               af_tensor **out, int *bad_attr);
/* What each layer of the library provides for op (as `aneforge ops` prints it). */
typedef struct {
    int cpu_kernel;          /* the CPU backend has its kernel (fp32 and fp16 storage), or it is a leaf */
    const char *vjp;         /* its gradient: "yes", "zero" (piecewise constant), "none" (made only in
                              * backward graphs), "leaf", or "MISSING" */
    const char *mil;         /* how it lowers to MIL, or NULL */
    const char *bridge_unit; /* a bridge op's net.plist unit Type, or NULL */
    const char *engine_restrictions; /* what the engine targets refuse of it, or NULL */
} af_op_support;
AF_API af_status   af_op_support_info(int op, af_op_support *out);

/* ---------------------------------------------------------------- MIL (src/mil)
 * Apple's Model Intermediate Language: the program text the Neural Engine compiler
 * takes, plus its MILBlob weight file. */

/* Writes the part of g that computes `out` from `in` (the same rules as af_compile) as
 * <dir>/model.mil (program(1.3), func main<ios18>, fp16 throughout, arguments in
 * alphabetical order) and <dir>/weights/weight.bin, creating the directories. */
AF_API af_status af_mil_emit(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                      const char *dir);
/* Reads a MIL program (program(1) .. program(1.5); functions main<ios15..ios18> and
 * main<CoreML5..CoreML9>; `main`, or the only function) and the weight
 * files it cites into a new graph: *in are its function arguments in order (af_input
 * nodes named as in the MIL), *out its returned values. BLOBFILE paths starting with
 * @model_path/weights/ are looked up in weights_dir (NULL = the weights/ folder beside
 * mil_path), other @model_path/ paths beside mil_path. The caller frees *g with
 * af_graph_free. *in and *out (nin and nout entries) belong to *g, like its tensors:
 * never free them; they stay valid, unchanged, while the graph is built on and models
 * are compiled from it, until the caller's af_graph_free(*g). Files are untrusted:
 * errors name the line and column. Any out pointer except g may be NULL; on failure
 * *g, *in and *out are NULL and *nin and *nout 0. */
AF_API af_status af_mil_load(const char *mil_path, const char *weights_dir, af_graph **g, int *nin, af_tensor ***in,
                      int *nout, af_tensor ***out);

/* A MIL program read with everything a runner needs beside its graph: the function to
 * read (NULL: main, or the only one), each argument's and result's MIL name and declared
 * dtype ("fp16", "int32", "bool", ...), and the gather/scatter indices known only at run
 * time. The graph treats an index outside its axis as no position (a row of zeros, a
 * dropped update), so a runner checks those values: compile the check's tensor as an
 * extra output (or, when it is an argument, take the fed values) and pass them to
 * af_mil_check_indices. Files are untrusted, as for af_mil_load. On failure *out is NULL.
 * Close with af_mil_close, which drops the program's reference to its graph: models
 * compiled from it keep working. */
typedef struct af_mil_program af_mil_program;
AF_API af_status af_mil_open(const char *mil_path, const char *weights_dir, const char *function, af_mil_program **out);
AF_API void      af_mil_close(af_mil_program *p); /* NULL is fine */
AF_API af_graph *af_mil_graph(const af_mil_program *p);
AF_API int       af_mil_num_args(const af_mil_program *p);
AF_API int       af_mil_num_results(const af_mil_program *p);
/* Argument / result i (NULL when out of range) with its MIL name and declared dtype
 * (owned by the program; either out pointer may be NULL). */
AF_API af_tensor *af_mil_arg(const af_mil_program *p, int i, const char **name, const char **dtype);
AF_API af_tensor *af_mil_result(const af_mil_program *p, int i, const char **name, const char **dtype);
/* The run-time index checks: how many, check i's indices tensor (in the program's graph),
 * and the check of the count(shape) values those indices took in a run: AF_ERR_INVALID
 * naming the file, line, op and the first index outside its range. */
AF_API int        af_mil_num_index_checks(const af_mil_program *p);
AF_API af_tensor *af_mil_index_tensor(const af_mil_program *p, int i);
AF_API af_status  af_mil_check_indices(const af_mil_program *p, int i, const float *values);

/* Core ML's MIL op set (iOS 15..18): op i's name, NULL past the last; *read (may be
 * NULL) says whether af_mil_load and af_mil_open read it. */
AF_API const char *af_mil_coreml_op(int i, int *read);

/* Built-in programs (what `aneforge mil emit NAME` writes and the golden tests pin): a
 * graph with its inputs and outputs; the caller frees g with af_graph_free. */
#define AF_MIL_SAMPLE_MAX_PORTS 16
typedef struct {
    af_graph *g;
    int nin, nout;
    af_tensor *in[AF_MIL_SAMPLE_MAX_PORTS], *out[AF_MIL_SAMPLE_MAX_PORTS];
} af_mil_sample;
/* Sample i's name ("mlp-step", "conv", "attention", "llama-fwdAttn", ...); NULL past the last. */
AF_API const char *af_mil_sample_name(int i);
/* Builds the sample called name into *out; AF_ERR_INVALID, listing the names, for another. */
AF_API af_status   af_mil_sample_build(const char *name, af_mil_sample *out);

/* ---------------------------------------------------------------- ane-sim (src/sim)
 * The simulated Neural Engine, AF_TARGET_ANE_SIM: the CPU kernels in fp16 storage plus
 * each family's compiler walls (af_compile fails with a message naming the wall and its
 * remedy), limits and numerics (matmul/conv +-inf beyond +-32752, fp16 reduce_sum, the
 * A13/A14 crop-DMA saturation), under the engine's per-process budgets.
 * Programs take and give fp16: an fp32 af_input is rejected (declare it AF_F16); af_run
 * still accepts fp32 host buffers and rounds them, and parameters keep their fp32
 * master on the host and are fed as fp16. */

/* The family af_compile compiles for under o (NULL: the defaults): AF_FAMILY_DEFAULT on
 * the cpu target; on ane the device's (loading the framework; a family o names must be
 * the device's); on ane-sim o's family resolved. Resolve it once and pass it on, so
 * everything sized for a family sizes for the one the backend checks. */
AF_API af_status    af_compile_family(const af_compile_opts *o, af_family_id *out);
AF_API af_family_id af_model_family(const af_model *m);         /* the family compiled for; DEFAULT on cpu */

/* The engine's per-process budgets. Its compiler fails after about 119 compiles per
 * process and at most 128 programs can be loaded; ane-sim keeps a program cache keyed
 * by program content (ops, shapes, attributes, fp16 constant bytes, family), so
 * compiling the same program again costs no compile, and loads beyond 128 evict the
 * least recently used program, which reloads on its next run. A compile that would
 * exceed the budget fails (as on the engine).
 * The cache and budget belong to an af_sim_engine: one simulated engine as one process
 * sees it. NULL (in af_compile_opts.sim_engine and below) is the default engine every
 * ane-sim model shares unless told otherwise; af_sim_engine_new makes a separate one (a
 * fresh process's worth of budget, e.g. one per test or per worker). Models keep their
 * engine alive: af_sim_engine_free may come first. Thread-safe. */
typedef struct af_sim_engine af_sim_engine;
AF_API af_sim_engine *af_sim_engine_new(void);
AF_API void af_sim_engine_free(af_sim_engine *e);
typedef struct {
    int compiles;       /* programs compiled in this process (cache misses) */
    int compile_limit;  /* 119 unless set */
    int cache_hits;     /* af_compile calls served by the cache */
    int cached;         /* distinct programs in the cache */
    int loaded;         /* programs loaded now (<= load_limit) */
    int load_limit;     /* 128 unless set */
    int loads;          /* loads, reloads after eviction included */
    int evictions;      /* least-recently-used programs unloaded to make room */
} af_ane_budget_info;
AF_API void af_ane_budget(const af_sim_engine *e, af_ane_budget_info *out);
/* Sets the limits (<= 0 restores 119 / 128); for tests and long sweeps. */
AF_API void af_ane_budget_set_limits(af_sim_engine *e, int compile_limit, int load_limit);
/* Forgets every cached program and zeroes the counters, as a process restart would;
 * models compiled earlier keep working. */
AF_API void af_ane_budget_reset(af_sim_engine *e);

/* User subtractions of near-equal values flagged so far by the run-time precision
 * check (once per node, also reported through the log; off with precision_check = AF_OFF).
 * The library's own vouched training kernels are not checked. */
AF_API int64_t af_ane_precision_flags(void);

/* Estimated on-device microseconds for the work in s (sum a step's af_model_stats over
 * its programs): dispatches * per-dispatch cost + engine_flops / throughput + bytes /
 * bandwidth, from published calibrations (M1: 3.25 TFLOP/s, 9 GB/s, 220 us; M5: 8.9
 * TFLOP/s, 57 GB/s, 110 us; A14/A15 interpolated). host_flops are not included. */
AF_API double af_ane_estimate_us(af_family_id fam, const af_stats *s);

#ifdef __cplusplus
} /* extern "C" */

/* C++ has no compound literals: there AF_SHAPE(2, n) is af_shape_of(2, n), which takes
 * dims of any integer type (int, size_t, int64_t); af_shape_of({2, n}) takes a list.
 * Both are inline here, not library symbols. */
#include <initializer_list>
inline af_shape af_shape_of(std::initializer_list<int64_t> dims) {
    return af_shape_make((int)dims.size(), dims.begin());
}
template <typename... D> inline af_shape af_shape_of(D... dims) {
    return af_shape_of({ static_cast<int64_t>(dims)... });
}
#define AF_SHAPE(...) af_shape_of(__VA_ARGS__)
#endif
#endif
