/* The kernel context and the backend function table.
 *
 * Every op has a reference twin in kernels/ref (plain loops: the spec), a fast
 * CPU twin in kernels/cpu, and a CUDA twin in kernels/cuda, all with the same
 * signature. mw_kernels_init_ref fills the table with the reference; the fast
 * inits override the entries they implement. Kernels allocate nothing and
 * return no status: shapes are checked when the model is built, and scratch
 * memory comes from the caller through mw_kctx.
 *
 * Layouts are Keras' channels_last: activations (N,H,W,C), conv kernels
 * (KH,KW,C,O), dense kernels (I,O). Layer backward functions ACCUMULATE into
 * every gradient output (dx, dw, db); the caller zeroes them once per step.
 * Elementwise backward (ReLU, cross-entropy) OVERWRITES its output and may run
 * in place, since nothing else contributes to those gradients. */
#ifndef MW_KERNELS_KERNELS_H
#define MW_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int nthreads;    /* threads the fast path may use (>= 1) */
    float *ws;       /* scratch, at least ws_count floats, 64-byte aligned */
    size_t ws_count; /* kernels chunk their work to fit */
    void *dev;       /* backend state (CUDA: stream and cuBLAS handle); NULL on CPU */
    int bf16;        /* 1: every operand of conv2d's and dense's matrix products holds bfloat16
                        values (mixed_bfloat16, worker/model/model.c): the fast CPU path multiplies
                        them with bfloat16 instructions, the same exact products summed in
                        float32 */
    int f16;         /* 1: the same with float16 values (mixed_float16): CUDA multiplies them on
                        float16 tensor cores, exactly as in float32 */
} mw_kctx;

/* Conv2D geometry for one layer (the batch size N is passed per call). */
typedef struct {
    int H, W, C;   /* input */
    int KH, KW, O; /* kernel, filters */
    int SH, SW;    /* strides */
    int PT, PL;    /* zero padding before the first row / column */
    int OH, OW;    /* output */
} mw_conv2d_geom;

/* Fill g for padding 'valid' (same = 0) or 'same' (same = 1, TF's rule:
 * out = ceil(in / stride), the odd pixel of padding goes after). Returns 0, or
 * -1 when the output would be empty. */
int mw_conv2d_geom_init(mw_conv2d_geom *g, int H, int W, int C, int O, int KH, int KW, int SH,
                        int SW, int same);

/* MaxPooling2D geometry ('valid' or 'same' padding, padded cells never win). */
typedef struct {
    int H, W, C;
    int PH, PW; /* pool size */
    int SH, SW;
    int PT, PL;
    int OH, OW;
} mw_pool_geom;

int mw_pool_geom_init(mw_pool_geom *g, int H, int W, int C, int PH, int PW, int SH, int SW,
                      int same);

/* Scratch floats the fast conv path wants for N images (the ref needs none);
 * callers give at least mw_conv2d_ws_min and at most this. */
size_t mw_conv2d_ws_count(const mw_conv2d_geom *g, int N);
size_t mw_conv2d_ws_min(const mw_conv2d_geom *g);
/* The scratch the chunking actually uses when given at most cap floats: as many whole images
 * as fit in cap (at least one, at most N, and no more rows than an int holds) times
 * mw_conv2d_ws_min. A device reserves this instead of mw_conv2d_ws_count, which for large
 * images and batches is gigabytes. */
size_t mw_conv2d_ws_capped(const mw_conv2d_geom *g, int N, size_t cap);

/* y (N,OH,OW,O) = conv(x (N,H,W,C), w (KH,KW,C,O)) + b (O). */
typedef void (*mw_conv2d_fwd_fn)(const mw_kctx *k, float *y, const float *x, const float *w,
                                 const float *b, const mw_conv2d_geom *g, int N);
/* dx += dconv/dx, dw += ..., db += sum dy. dx may be NULL (first layer). */
typedef void (*mw_conv2d_bwd_fn)(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                                 const float *x, const float *w, const mw_conv2d_geom *g, int N);
/* y (N,OH,OW,C) = max over each window; argmax (N,OH,OW,C) keeps the winning
 * input offset within one image (h*W + w)*C + c, for backward. */
typedef void (*mw_pool_fwd_fn)(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                               const mw_pool_geom *g, int N);
/* dx[argmax] += dy. */
typedef void (*mw_pool_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax,
                               const mw_pool_geom *g, int N);
/* y (N,O) = x (N,I) * w (I,O) + b (O). */
typedef void (*mw_dense_fwd_fn)(const mw_kctx *k, float *y, const float *x, const float *w,
                                const float *b, int N, int I, int O);
/* dx += dy w^T (dx may be NULL), dw += x^T dy, db += sum dy. */
typedef void (*mw_dense_bwd_fn)(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, int N, int I, int O);
/* y = max(x, 0); y may equal x. */
typedef void (*mw_relu_fwd_fn)(const mw_kctx *k, float *y, const float *x, size_t count);
/* dx = dy * (y > 0), from the forward OUTPUT y; dx may equal dy. */
typedef void (*mw_relu_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const float *y,
                               size_t count);
/* Sparse softmax cross-entropy from logits (N,K): prob = softmax(logits),
 * loss[i] = -log prob[i][label[i]], computed stably (log-sum-exp). A label outside [0, K) (an
 * ignore_class label: the data check every other) has loss 0 and no one-hot term; its
 * sample weight 0 zeroes its gradient. */
typedef void (*mw_xent_fwd_fn)(const mw_kctx *k, float *loss, float *prob, const float *logits,
                               const int32_t *labels, int N, int K);
/* dlogits = scale * (prob - onehot(label)) (onehot 0 for a label outside [0, K)). */
typedef void (*mw_xent_bwd_fn)(const mw_kctx *k, float *dlogits, const float *prob,
                               const int32_t *labels, float scale, int N, int K);
/* The losses of dense float targets y (N, K), Keras 3's formulas (keras/src/losses/losses.py
 * and its backends' nn.py): per example the mean over K of an elementwise loss, or the sum
 * over K (CCE). The formulas are kernels/loss_rules.h. */
typedef enum {
    MW_DLOSS_MSE,     /* (p - y)^2 */
    MW_DLOSS_MAE,     /* |p - y| */
    MW_DLOSS_HUBER,   /* e^2 / 2 where |e| <= delta, else delta |e| - delta^2 / 2 */
    MW_DLOSS_LOGCOSH, /* e + softplus(-2 e) - log 2 */
    MW_DLOSS_BCE,     /* -(y log p + (1 - y) log(1 - p)); p clipped to [1e-7, 1 - 1e-7] */
    MW_DLOSS_FOCAL,   /* (1 - p_t)^gamma bce, times alpha_t when balanced */
    MW_DLOSS_CCE,     /* -sum_k y_k log softmax(z)_k, from logits (a final softmax folded) */
} mw_dloss_kind;

typedef struct {
    mw_dloss_kind kind;
    int from_logits; /* BCE, FOCAL: out holds logits, p = sigmoid(out) */
    float smoothing; /* BCE, FOCAL: y (1 - s) + s / 2; CCE: y (1 - s) + s / K */
    float delta;     /* HUBER */
    float gamma;     /* FOCAL */
    float alpha;     /* FOCAL, when balanced: alpha for y = 1, 1 - alpha for y = 0 */
    int balanced;    /* FOCAL: apply_class_balancing */
} mw_dloss;

/* The metrics an epoch reports beside the loss (Keras' names: accuracy in its sparse,
 * categorical and binary forms, mae, mse, rmse), each a per-example value summed over the
 * epoch (kernels/loss_rules.h: metric_value). */
typedef enum {
    MW_METRIC_NONE,
    MW_METRIC_SPARSE_ACC, /* argmax(q) == label */
    MW_METRIC_CAT_ACC,    /* argmax(q) == argmax(y) */
    MW_METRIC_BIN_ACC,    /* mean over K of (q > 0.5) == y */
    MW_METRIC_MAE,        /* mean over K of |q - y| */
    MW_METRIC_MSE,        /* mean over K of (q - y)^2 */
    MW_METRIC_RMSE,       /* the same per example; the root of the epoch's mean */
    MW_METRIC_AUC,        /* Keras' AUC(): ROC, interpolated, 200 thresholds, over every
                             output (q clipped to [0, 1]) against y != 0 */
} mw_metric_kind;

/* The metrics a model reports, in compile_config's order (at most one AUC). */
#define MW_METRICS_MAX 4
typedef struct {
    int n;
    mw_metric_kind kind[MW_METRICS_MAX];
    int positions; /* outputs per example: a sequence's T (each example's value the mean over
                      its positions, an AUC counting every one); 0 or 1: one */
    int masked;    /* 1: the output carries Embedding(mask_zero)'s padding mask (Keras' metrics
                      weigh by it): output position p of an example counts only where its input
                      id at p is not 0; each metric's slot sums its counted positions' values
                      and MW_SUM_VALID counts them (mw_metrics_value: the mean over them) */
} mw_metric_list;

/* Keras' AUC thresholds (num_thresholds): an output q falls in bucket
 * max(0, ceil(q * (T - 1)) - 1), and the counts at threshold j are those of buckets >= j. */
#define MW_AUC_THRESHOLDS 200
/* The running sums of the metrics (host and device alike), in doubles: [MW_SUM_LOSS] the
 * loss sum, [MW_SUM_COUNT] the examples, [MW_SUM_METRIC(i)] metric i's per-example values
 * summed (an AUC's slot unused), then, when an AUC is listed, the positive and the negative
 * outputs counted per bucket. Integer counts: their sums are exact in any order. */
#define MW_SUM_LOSS 0
#define MW_SUM_COUNT 1
#define MW_SUM_VALID 2 /* with a padding mask: the positions counted (mw_metric_list.masked) */
#define MW_SUM_METRIC(i) (3 + (i))
#define MW_SUM_AUC_POS (3 + MW_METRICS_MAX)
#define MW_SUM_AUC_NEG (MW_SUM_AUC_POS + MW_AUC_THRESHOLDS)
#define MW_SUMS (MW_SUM_AUC_NEG + MW_AUC_THRESHOLDS)

/* loss[i] from out row i and y row i; prob (N, K): the output as Keras' metrics see it
 * (CCE: softmax(out), the folded softmax; otherwise out as it is). */
typedef void (*mw_dloss_fwd_fn)(const mw_kctx *k, const mw_dloss *p, float *loss, float *prob,
                                const float *out, const float *y, int N, int K);
/* dout = scale * d loss[i] / d out (dout may not alias out or prob). */
typedef void (*mw_dloss_bwd_fn)(const mw_kctx *k, const mw_dloss *p, float *dout, const float *out,
                                const float *prob, const float *y, float scale, int N, int K);
/* Embedding (kernels/embed.h): ids (n, T) token ids held as floats (exact below 2^24),
 * table (V, D), y (n, T, D): y[i, t] = table[ids[i, t]]. An id that is not an integer in
 * [0, V) (the data are checked before: never) gives a zero row. */
typedef void (*mw_embed_fwd_fn)(const mw_kctx *k, float *y, const float *ids, const float *table,
                                int n, int T, int D, int V);
/* gtable[ids[i, t]] += dy[i, t] for every (i, t) (an id outside [0, V): nothing). */
typedef void (*mw_embed_bwd_fn)(const mw_kctx *k, float *gtable, const float *dy, const float *ids,
                                int n, int T, int D, int V);
/* Keras' GlobalAveragePooling1D under a padding mask (Embedding(mask_zero=True): the steps
 * whose id is 0 are padding): x (n, T, D), ids (n, T); y[i] = the sum over the steps of x[i, t]
 * with ids[i, t] != 0, divided by their number (0 of them: 0 / 0, NaN, as Keras). */
typedef void (*mw_masked_mean_fwd_fn)(const mw_kctx *k, float *y, const float *x, const float *ids,
                                      int n, int T, int D);
/* dx[i, t] += dy[i] / count for the unmasked steps (accumulates, as every backward). */
typedef void (*mw_masked_mean_bwd_fn)(const mw_kctx *k, float *dx, const float *dy,
                                      const float *ids, int n, int T, int D);
/* Keras' LayerNormalization over the last axis (kernels/layernorm.h): for each of rows rows
 * of D values, y = (x - mean) / sqrt(var + eps) * gamma + beta (var the biased variance;
 * gamma, beta NULL: 1, 0); stat (2 x rows) gets each row's mean and 1 / sqrt(var + eps) for
 * the backward. */
typedef void (*mw_layernorm_fwd_fn)(const mw_kctx *k, float *y, float *stat, const float *x,
                                    const float *gamma, const float *beta, int rows, int D,
                                    float eps);
/* dx += the input's gradient (dx NULL: none); dgamma, dbeta += theirs (NULL: none), from x,
 * stat and dy. */
typedef void (*mw_layernorm_bwd_fn)(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                                    const float *dy, const float *x, const float *stat,
                                    const float *gamma, int rows, int D);
/* Keras' MultiHeadAttention between its projections (kernels/attention.h), per example i and
 * head h: q (n, T, H, dk), kk (n, S, H, dk), v (n, S, H, dv), the layout of Keras' projected
 * tensors. Scores s[t, u] = (q[t] * scale) . kk[u]; where (t, u) is masked, -1e9 instead, and
 * p = softmax over u with the masked probabilities 0; o[t] = sum over u of p[t, u] drop[t, u]
 * v[u]. A row masked everywhere (a padded query step's) is what Keras 3.15 computes there,
 * which depends on the layer's dropout: with none, its dot_product_attention's softmax over
 * equal scores, 1 / S for every key (empty_uniform); with dropout, its Softmax(mask), which
 * zeroes the masked probabilities, 0 (and so is the output). Either way the row's gradient
 * reaches no score. */
typedef struct {
    int T, S, H, dk, dv; /* query and key positions, heads, key and value widths */
    float scale;         /* multiplies q: Keras' 1 / sqrt(key_dim) in float32 */
    int causal;          /* use_causal_mask: (t, u) masked where u > t */
    const float *qids;   /* a query padding mask: (t, u) masked where qids[i, t] == 0 (token ids
                            (n, T) as floats, the model's input); NULL: none */
    const float *vids;   /* the same for the values: masked where vids[i, u] == 0 */
    int empty_uniform;   /* a row masked everywhere: 1 / S (1), or 0 (0); see above */
    /* dropout of the probabilities while training (rate 0: none): kept where
     * mw_rng_hash(seed, stream, ids[i] * H T S + (h T + t) S + u) >> 40 is at least
     * mw_dropout_threshold(rate), then times 1 / (1 - rate); ids NULL: example i has id i. The
     * multipliers are recomputed where needed, never stored. */
    float rate;
    uint64_t seed, stream;
    const uint32_t *ids;
} mw_attn_geom;
/* p (n, H, T, S) gets the probabilities (kept for the backward), o (n, T, H, dv) the output. */
typedef void (*mw_attn_fwd_fn)(const mw_kctx *k, float *o, float *p, const float *q,
                               const float *kk, const float *v, const mw_attn_geom *g, int n);
/* dq, dk, dv += the gradients (same layouts as q, kk, v) from dout (n, T, H, dv) and the
 * forward's p, which it overwrites (the scores' gradient takes its place). */
typedef void (*mw_attn_bwd_fn)(const mw_kctx *k, float *dq, float *dk, float *dv, float *p,
                               const float *dout, const float *q, const float *kk, const float *v,
                               const mw_attn_geom *g, int n);
/* Floats of k's scratch the fast CPU attention uses (one T x S matrix per thread, for up to
 * this many threads); the others use none. */
#define MW_ATTN_WS_SLOTS 16
/* KerasHub's SinePositionEncoding (kernels/embed.h): y (n, T, D), the same for every example:
 * step t, feature j: sin(t w_j) for even j, cos(t w_j) for odd j, w_j = (1 / max_wavelength)
 * ^ (2 floor(j / 2) / D), each step in float32 as KerasHub computes it. */
typedef void (*mw_sine_pos_fn)(const mw_kctx *k, float *y, int n, int T, int D,
                               float max_wavelength);
/* Sample weights: row i of a (n, width) times w[i] (a per-example loss, or its gradient). */
typedef void (*mw_scale_rows_fn)(const mw_kctx *k, float *a, const float *w, int n, int width);
/* out[i] = the mean of in[i P .. i P + P) (a sequence's per-position losses into its
 * example's loss, summed in order in double); out and in do not overlap. */
typedef void (*mw_row_mean_fn)(const mw_kctx *k, float *out, const float *in, int n, int P);
/* One optimizer step's scalars, for the update rules of kernels/optim.h (Keras 3's
 * formulas). Per element, in this order: p -= p * weight_decay * decay_lr (when
 * weight_decay > 0); g' = g * gscale, clamped to [-clipvalue, clipvalue] when clipvalue > 0
 * (the gradient itself is never written); then the rule's update with g'. */
typedef struct {
    float lr;           /* the rule's rate (Adam: alpha = lr sqrt(1 - b2^t) / (1 - b1^t)) */
    float weight_decay; /* decoupled weight decay (0: none) */
    float decay_lr;     /* the scheduled learning rate the decay multiplies */
    float gscale;       /* clipnorm / global_clipnorm factor (1: none) */
    float clipvalue;    /* 0: none */
    /* Adam: 1 - beta_1 and 1 - beta_2 computed in double and rounded once to float32, as
     * Keras' Python floats are (1.0f - 0.9f would be 0.100000024, Keras multiplies by 0.1f) */
    float one_minus_beta1, one_minus_beta2, epsilon;
    float momentum; /* SGD, RMSprop (0: no momentum slot) */
    float rho;      /* RMSprop */
    float beta2;    /* Adamax: beta_2 rounded to float32, as Keras multiplies by it */
    float bias1;    /* Adamax: 1 - beta_1^t in float32 */
    int nesterov, amsgrad, centered;
} mw_optim_hyper;
/* An update rule over count elements: parameters p, slots s1..s3 (which ones a rule uses, and
 * their meaning, are in kernels/optim.h; unused ones may be NULL), gradients g (read only). */
typedef void (*mw_optim_fn)(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,
                            const float *g, size_t count, const mw_optim_hyper *h);
/* *out = sum of g[i]^2 in double, in a fixed order (reproducible). out is HOST memory: the
 * CUDA twin waits for its stream. */
typedef void (*mw_sumsq_fn)(const mw_kctx *k, double *out, const float *g, size_t count);
/* Inverted dropout while training, x and y (N, D): element e of example n is
 * kept when mw_rng_hash(seed, stream, ids[n] * D + e) >> 40 (24 uniform bits)
 * is at least ceil(rate * 2^24), so a mask depends on the example's global id
 * and never on its batch position; mask = kept ? 1 / (1 - rate) : 0 and
 * y = x * mask. ids NULL: example n has id n. y may equal x. 0 <= rate < 1. */
typedef void (*mw_dropout_fwd_fn)(const mw_kctx *k, float *y, float *mask, const float *x,
                                  const uint32_t *ids, uint64_t seed, uint64_t stream, float rate,
                                  int N, size_t D);
/* dx = dy * mask, count elements (overwrites; dx may equal dy). */
typedef void (*mw_dropout_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                                  size_t count);
/* p[0..nbytes) = 0 in the backend's memory (host: memset; CUDA: enqueued on
 * k's stream). The model zeroes the gradient buffers it accumulates into with
 * it; a table without it (NULL) means memset. */
typedef void (*mw_zero_fn)(const mw_kctx *k, void *p, size_t nbytes);
/* Keras' L1/L2 weight penalty on count weights w, both in the backend's memory:
 *   g[i] += scale (l1 sign(w[i]) + 2 l2 w[i])     (in float; skipped when g is NULL)
 *   *acc += scale (l1 sum |w| + l2 sum w^2)       (the sums in double)
 * acc is ONE double in the backend's memory (device memory on CUDA), so the
 * penalty never needs a synchronization to be added up. The CUDA twin needs 2 x
 * 256 doubles of k's scratch and sums in a fixed order (reproducible). */
typedef void (*mw_regularize_fn)(const mw_kctx *k, float *g, double *acc, const float *w,
                                 size_t count, double l1, double l2, float scale);

/* Elementwise activations beyond ReLU, as Keras 3 defines them (alpha: elu's alpha,
 * leaky_relu's negative slope). gelu is the exact erf form (Keras' approximate=False),
 * gelu_tanh the tanh approximation. */
typedef enum {
    MW_ACTK_SIGMOID,
    MW_ACTK_TANH,
    MW_ACTK_GELU,
    MW_ACTK_GELU_TANH,
    MW_ACTK_SILU,
    MW_ACTK_ELU,
    MW_ACTK_LEAKY_RELU,
} mw_act_kind;

/* BatchNormalization over rows of C channels (rows = N*H*W), training: mean and var (the
 * biased batch variance) per channel, invstd = 1 / sqrt(var + eps), y = (x - mean) * invstd
 * * gamma + beta (gamma NULL: 1, beta NULL: 0). Sums in double. y may not alias x. */
typedef void (*mw_bn_fwd_train_fn)(const mw_kctx *k, float *y, float *mean, float *var,
                                   float *invstd, const float *x, const float *gamma,
                                   const float *beta, size_t rows, int C, float eps);
/* Inference: the same with the given (moving) mean and variance. */
typedef void (*mw_bn_fwd_infer_fn)(const mw_kctx *k, float *y, const float *x, const float *gamma,
                                   const float *beta, const float *mean, const float *var,
                                   size_t rows, int C, float eps);
/* Backward of the training forward: dx += ..., dgamma += sum dy xhat, dbeta += sum dy
 * (dgamma / dbeta NULL: skipped; gamma NULL: 1). */
typedef void (*mw_bn_bwd_fn)(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                             const float *dy, const float *x, const float *mean,
                             const float *invstd, const float *gamma, size_t rows, int C);
/* The moving statistics (worker/model/model.h), in the backend's memory, count elements:
 * stats_acc adds a replica's batch statistics into their gradient slots, g[i] += w * st[i];
 * stats_update folds the all-reduced sums in, p[i] = p[i] * momentum + g[i] * (1 - momentum),
 * and zeroes g[i]. Float products and sums, each rounded on its own (the CUDA twin forbids
 * fma contraction), so the tables agree bitwise. */
typedef void (*mw_bn_stats_acc_fn)(const mw_kctx *k, float *g, const float *st, size_t count,
                                   float w);
typedef void (*mw_bn_stats_update_fn)(const mw_kctx *k, float *p, float *g, size_t count,
                                      float momentum);
/* Synchronized BatchNormalization (Keras' synchronized=True): the batch statistics and the
 * backward's two sums are taken over every replica's slice. bn_sums gives this slice's
 * per-channel sums (s: 2 C doubles, overwritten), which the caller sums over the replicas:
 * dy NULL: s[c] = sum x, s[C + c] = sum x^2 (forward); otherwise s[c] = sum dy,
 * s[C + c] = sum dy xhat with xhat = (x - mean) * invstd (backward), which are also this
 * slice's gradients of beta and gamma: dbeta[c] += s[c], dgamma[c] += s[C + c] (either NULL:
 * skipped; both ignored in the forward). */
typedef void (*mw_bn_sums_fn)(const mw_kctx *k, double *s, const float *x, const float *dy,
                              const float *mean, const float *invstd, float *dgamma, float *dbeta,
                              size_t rows, int C);
/* The forward from the summed s over M rows in all: mean = s[c] / M, var = max(s[C + c] / M
 * - mean^2, 0) (biased), invstd and y as bn_fwd_train. */
typedef void (*mw_bn_sync_fwd_fn)(const mw_kctx *k, float *y, float *mean, float *var,
                                  float *invstd, const float *x, const float *gamma,
                                  const float *beta, const double *s, double M, size_t rows, int C,
                                  float eps);
/* dx += gamma invstd / M (M dy - s[c] - xhat s[C + c]) with the summed backward s over M rows
 * (gamma NULL: 1); dgamma and dbeta are this slice's own (bn_sums). */
typedef void (*mw_bn_sync_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const float *x,
                                  const float *mean, const float *invstd, const float *gamma,
                                  const double *s, double M, size_t rows, int C);
/* AveragePooling2D: the mean over the window's cells inside the image (padded cells are
 * not counted, as in TensorFlow); backward dx += dy / cells. */
typedef void (*mw_avgpool_fwd_fn)(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g,
                                  int N);
typedef void (*mw_avgpool_bwd_fn)(const mw_kctx *k, float *dx, const float *dy,
                                  const mw_pool_geom *g, int N);
/* ZeroPadding2D: y (N, PT+H+PB, PL+W+PR, C) = x padded with zeros; backward dx += the
 * inner part of dy. */
typedef void (*mw_pad2d_fwd_fn)(const mw_kctx *k, float *y, const float *x, int H, int W, int C,
                                int PT, int PB, int PL, int PR, int N);
typedef void (*mw_pad2d_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C,
                                int PT, int PB, int PL, int PR, int N);
/* y += x (Add, and the gradient of a tensor with several consumers). */
typedef void (*mw_acc_fn)(const mw_kctx *k, float *y, const float *x, size_t count);
/* Multiply: y = a * b; backward da += dy * b, db += dy * a. */
typedef void (*mw_mul_fwd_fn)(const mw_kctx *k, float *y, const float *a, const float *b,
                              size_t count);
typedef void (*mw_mul_bwd_fn)(const mw_kctx *k, float *da, float *db, const float *dy,
                              const float *a, const float *b, size_t count);
/* Concatenate on the channel axis: y (rows, CY)[:, off:off+CX] = x (rows, CX); backward
 * dx += that part of dy. */
typedef void (*mw_concat_fwd_fn)(const mw_kctx *k, float *y, const float *x, size_t rows, int CX,
                                 int CY, int off);
typedef void (*mw_concat_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX,
                                 int CY, int off);
/* y = act(x) (y may not alias x); backward dx += dy * act'(x), from x and y. */
typedef void (*mw_act_fwd_fn)(const mw_kctx *k, float *y, const float *x, size_t count,
                              mw_act_kind kind, float alpha);
typedef void (*mw_act_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const float *x,
                              const float *y, size_t count, mw_act_kind kind, float alpha);
/* Round count floats in place to the nearest bfloat16 (round_bf16) or float16 (round_f16)
 * value (kernels/cast.h): the casts of mixed precision. */
typedef void (*mw_round_bf16_fn)(const mw_kctx *k, float *p, size_t count);
/* Softmax over the last axis of (rows, C), as a layer; backward dx += y (dy - sum dy y). */
typedef void (*mw_softmax_fwd_fn)(const mw_kctx *k, float *y, const float *x, size_t rows, int C);
typedef void (*mw_softmax_bwd_fn)(const mw_kctx *k, float *dx, const float *dy, const float *y,
                                  size_t rows, int C);

typedef struct {
    const char *name; /* "ref", "cpu", "cuda" */
    mw_conv2d_fwd_fn conv2d_fwd;
    mw_conv2d_bwd_fn conv2d_bwd;
    mw_pool_fwd_fn maxpool_fwd;
    mw_pool_bwd_fn maxpool_bwd;
    mw_dense_fwd_fn dense_fwd;
    mw_dense_bwd_fn dense_bwd;
    mw_relu_fwd_fn relu_fwd;
    mw_relu_bwd_fn relu_bwd;
    mw_xent_fwd_fn xent_fwd;
    mw_xent_bwd_fn xent_bwd;
    mw_dloss_fwd_fn dloss_fwd; /* kernels/loss.h */
    mw_dloss_bwd_fn dloss_bwd;
    mw_scale_rows_fn scale_rows;
    mw_row_mean_fn row_mean;
    mw_embed_fwd_fn embed_fwd; /* kernels/embed.h */
    mw_embed_bwd_fn embed_bwd;
    mw_masked_mean_fwd_fn masked_mean_fwd;
    mw_masked_mean_bwd_fn masked_mean_bwd;
    mw_sine_pos_fn sine_pos;
    mw_layernorm_fwd_fn layernorm_fwd; /* kernels/layernorm.h */
    mw_layernorm_bwd_fn layernorm_bwd;
    mw_attn_fwd_fn attn_fwd; /* kernels/attention.h */
    mw_attn_bwd_fn attn_bwd;
    mw_dropout_fwd_fn dropout_fwd;
    mw_dropout_bwd_fn dropout_bwd;
    mw_zero_fn zero;
    mw_regularize_fn regularize;
    /* Functional-graph layers (kernels/graphops.h). A table may leave them NULL: a model
     * that needs one is then refused (mw_model_check_kernels). */
    mw_bn_fwd_train_fn bn_fwd_train;
    mw_bn_fwd_infer_fn bn_fwd_infer;
    mw_bn_bwd_fn bn_bwd;
    mw_bn_stats_acc_fn bn_stats_acc;
    mw_bn_stats_update_fn bn_stats_update;
    mw_bn_sums_fn bn_sums; /* synchronized BN: NULL where the backend cannot run it */
    mw_bn_sync_fwd_fn bn_sync_fwd;
    mw_bn_sync_bwd_fn bn_sync_bwd;
    mw_avgpool_fwd_fn avgpool_fwd;
    mw_avgpool_bwd_fn avgpool_bwd;
    mw_pad2d_fwd_fn pad2d_fwd;
    mw_pad2d_bwd_fn pad2d_bwd;
    mw_acc_fn acc;
    mw_mul_fwd_fn mul_fwd;
    mw_mul_bwd_fn mul_bwd;
    mw_concat_fwd_fn concat_fwd;
    mw_concat_bwd_fn concat_bwd;
    mw_act_fwd_fn act_fwd;
    mw_act_bwd_fn act_bwd;
    mw_softmax_fwd_fn softmax_fwd;
    mw_softmax_bwd_fn softmax_bwd;
    mw_optim_fn sgd_step, adam_step, rmsprop_step, adagrad_step, adamax_step; /* kernels/optim.h */
    mw_sumsq_fn sumsq;
    mw_round_bf16_fn round_bf16; /* mixed_bfloat16; NULL where the backend cannot run it */
    mw_round_bf16_fn round_f16;  /* mixed_float16; likewise */
} mw_kernels;

void mw_kernels_init_ref(mw_kernels *t);
/* The reference, overridden by the fast CPU path. */
void mw_kernels_init_cpu(mw_kernels *t);

/* Name of the matrix library behind the fast CPU path ("OpenBLAS", "oneDNN"). */
const char *mw_kernels_cpu_blas(void);
/* The instruction set oneDNN's kernels use here ("avx2", "avx512_core_bf16", ...; the CPU's
 * best unless ONEDNN_MAX_CPU_ISA caps it), or "" when oneDNN is not the matrix library.
 * Another ISA means other kernels, which sum in another order. */
const char *mw_kernels_cpu_isa(void);
/* 1 when oneDNN is the matrix library and its ISA has bfloat16 instructions (AVX512_BF16 or
 * AMX: avx512_core_bf16, avx512_core_amx), the CPUs where mixed_bfloat16 is offered. */
int mw_kernels_cpu_has_bf16(void);
/* Tell the matrix library how many threads it may use. */
void mw_kernels_cpu_set_threads(int n);

#endif
