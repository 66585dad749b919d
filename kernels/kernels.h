/* The kernel context and the backend function table.
 *
 * Every op is one entry of kernels/kernel_list.h, with a reference twin in kernels/ref (plain
 * loops: the spec), a CUDA twin in kernels/cuda and, where the list says so, a fast CPU twin
 * in kernels/cpu, all with the same signature (prototypes: kernels/twins.h).
 * mw_kernels_init_ref fills the table with the reference; the fast inits override the entries
 * they implement. Kernels allocate nothing and
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
    int DH, DW;    /* dilation: kernel tap (kh, kw) reads input row oh*SH + kh*DH - PT (1: none) */
    int G;         /* groups (Keras' Conv2D groups; 1: none): filters [i O/G, (i+1) O/G) read
                      input channels [i C/G, (i+1) C/G) only, through kernel w (KH, KW, C/G, O)
                      (mw_conv2d_geom_group) */
} mw_conv2d_geom;

/* The kernel's values: KH * KW * (C / G) * O. */
static inline size_t mw_conv2d_w_count(const mw_conv2d_geom *g)
{
    return (size_t)g->KH * g->KW * (g->C / g->G) * g->O;
}

/* MaxPooling2D geometry ('valid' or 'same' padding, padded cells never win). */
typedef struct {
    int H, W, C;
    int PH, PW; /* pool size */
    int SH, SW;
    int PT, PL;
    int OH, OW;
} mw_pool_geom;

/* A broadcasting merge (Add, Multiply of unequal shapes): y's shape d (N, H, W, C) and each
 * operand's strides in elements along those axes, 0 along an axis it is broadcast on (its
 * size 1 there), so that a[n, h, w, c] is a[n sa[0] + h sa[1] + w sa[2] + c sa[3]]. */
typedef struct {
    int d[4];
    size_t sa[4], sb[4];
} mw_bcast_geom;

/* Keras' Rescaling as a layer: y = x * scale[c] + offset[c] for channel c = i % C of element i
 * (C = 1: one scale and one offset for every value; Keras broadcasts a list on the last axis).
 * Passed by value to the device: a per-channel map holds at most MW_RESCALE_MAX_C channels. */
#define MW_RESCALE_MAX_C 8
typedef struct {
    int C;
    float scale[MW_RESCALE_MAX_C], offset[MW_RESCALE_MAX_C];
} mw_rescale;

/* The elements operand k of g spans: y's (k 0), a's (1) or b's (2). */
static inline size_t mw_bcast_count(const mw_bcast_geom *g, int k)
{
    const size_t *s = k == 1 ? g->sa : g->sb;
    size_t n = 1;
    for (int i = 0; i < 4; i++)
        n *= k == 0 || s[i] ? (size_t)g->d[i] : 1;
    return n;
}

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
    int weighted;  /* 1: Keras' weighted_metrics: each position's value times its sample weight
                      (the batch's, when it has some), MW_SUM_VALID the weights' sum, the value
                      the weighted mean (with a mask too: times 0 where it is padding) */
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

/* Keras' MultiHeadAttention between its projections (attn_fwd, attn_bwd), per example i and
 * head h: q (n, T, H, dk), kk (n, S, H, dk), v (n, S, H, dv), the layout of Keras' projected
 * tensors. Scores s[t, u] = (q[t] * scale) . kk[u] (soft-capped when soft_cap > 0); where
 * (t, u) is masked, -1e9 instead, and
 * p = softmax over u with the masked probabilities 0; o[t] = sum over u of p[t, u] drop[t, u]
 * v[u]. A row masked everywhere (a padded query step's) is what Keras 3.15 computes there,
 * which depends on the layer's dropout: with none, its dot_product_attention's softmax over
 * equal scores, 1 / S for every key (empty_uniform); with dropout, its Softmax(mask), which
 * zeroes the masked probabilities, 0 (and so is the output). Either way the row's gradient
 * reaches no score. */
typedef struct {
    int T, S, H, dk, dv; /* query and key positions, heads, key and value widths */
    int kv_heads;        /* key and value heads (grouped-query attention), dividing H: query
                            head h reads key and value head h / (H / kv_heads); kk and v are
                            (n, S, kv_heads, dk or dv); 0: H (one each) */
    float scale;         /* multiplies q: Keras' 1 / sqrt(key_dim) in float32 */
    float soft_cap;      /* > 0: each score s becomes soft_cap tanh(s / soft_cap) before the
                            masks (Gemma 2's logit_soft_cap: s / c, tanh, times c); 0: none */
    int causal;          /* use_causal_mask: (t, u) masked where u > t */
    int window;          /* > 0: (t, u) masked where |t - u| >= window as well (Gemma 2's
                            sliding window); 0: none */
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
    /* A mixed policy's 16-bit probabilities, as Keras' fused attention holds them: 1 bfloat16,
     * 2 float16 (kernels/cast.h's roundings), 0 none. The probabilities are rounded where they
     * multiply v (the forward's o, the backward's dv), and dp = dout . v is rounded before its
     * dropout multiplier; p stays float32 for the softmax's backward, as JAX's float32 softmax
     * keeps its own output. */
    int half;
    /* With half: the scores a 16-bit tensor too, as KerasHub's einsum attention holds them
     * (Gemma's on a CPU): each score rounded after its sum (the caller passes the query scaled
     * and rounded, and scale 1); under a soft cap c, each of s / c, its tanh and the product by
     * c rounded (c itself rounded first); in the backward the scores' gradient rounded, then the
     * cap's gradients op by op as JAX takes them (att_ds_raw). 0: the scores stay float32. */
    int half_scores;
} mw_attn_geom;

/* The key and value heads of g (kv_heads, or H when 0). */
static inline int mw_attn_kvh(const mw_attn_geom *g)
{
    return g->kv_heads > 0 ? g->kv_heads : g->H;
}

/* 1 when the probabilities that multiply v are p itself (no dropout, no 16-bit rounding); 0
 * when the twins form them in scratch first. */
static inline int mw_attn_p_as_is(const mw_attn_geom *g)
{
    return !(g->rate > 0.0f) && !g->half;
}

/* Floats of k's scratch the fast CPU attention uses (one T x S matrix per thread, for up to
 * this many threads), and the CUDA twin (one per example of a chunk: the GPU replicas reserve
 * this many); the reference uses none. */
#define MW_ATTN_WS_SLOTS 16

/* One optimizer step's scalars, for the update rules of kernels/kernel_list.h (Keras 3's
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

/* Elementwise activations beyond ReLU, as Keras 3 defines them (alpha: elu's alpha,
 * leaky_relu's negative slope), listed once: X(KIND) makes MW_ACTK_<KIND>, and the fast CPU
 * twin's per-kind loops and the tests' sweeps come from the list; each kind's value and slope
 * are its cases in kernels/act_rules.h. gelu is the exact erf form (Keras' approximate=False),
 * gelu_tanh the tanh approximation. */
/* clang-format off */
#define MW_ACT_KINDS(X)                                                                            \
    X(SIGMOID) X(TANH) X(GELU) X(GELU_TANH) X(SILU) X(ELU) X(LEAKY_RELU) X(RELU6)                  \
    X(HARD_SIGMOID) X(HARD_SILU)
/* clang-format on */
#define MW_ACTK_ENUM_(kind) MW_ACTK_##kind,
typedef enum { MW_ACT_KINDS(MW_ACTK_ENUM_) MW_ACTK_COUNT } mw_act_kind;
#undef MW_ACTK_ENUM_
/* dense_act_fwd's kind for a ReLU (relux_fwd's, clipped at its alpha), past act_fwd's kinds. */
#define MW_ACTK_RELU MW_ACTK_COUNT

/* The entries' function types, mw_<op>_fn, and the table: one field per entry of
 * kernels/kernel_list.h, where each entry's contract is. A backend's table may leave an entry
 * NULL where it cannot run it (a model that needs it is then refused,
 * mw_model_check_kernels); the ref, cpu and cuda tables fill every one. */
#define MW_UNPAREN(...) __VA_ARGS__
/* The list's conditional arrays, for the includers that define MW_A and MW_O. */
#define MW_AIF(cond, p, count)                                                                     \
    if (cond)                                                                                      \
    MW_A(p, count)
#define MW_OIF(cond, p, count)                                                                     \
    if (cond)                                                                                      \
    MW_O(p, count)
#define MW_KERNEL(op, fast, params, args, arrays)                                                  \
    typedef void (*mw_##op##_fn)(const mw_kctx *k, MW_UNPAREN params);
#include "kernels/kernel_list.h"
#undef MW_KERNEL
/* Any of the optimizer update rules (they share one signature). */
typedef mw_sgd_step_fn mw_optim_fn;

typedef struct {
    const char *name; /* "ref", "cpu", "cuda" */
#define MW_KERNEL(op, fast, params, args, arrays) mw_##op##_fn op;
#include "kernels/kernel_list.h"
#undef MW_KERNEL
} mw_kernels;

#endif
