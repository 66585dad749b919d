/* The model: a graph of layers in topological order over one flat parameter arena.
 *
 * Each layer names its input tensors by their producers (layer indices, -1 for the model's
 * input); a Sequential model is the chain where layer i reads layer i-1. Tensors: act[0] is
 * the input, act[i+1] the output of layer i. A tensor read by several layers gets the SUM of
 * their gradients (each consumer accumulates); a layer runs in place (its output aliases its
 * input) only when it is its input's sole consumer. The last layer is the model's output.
 *
 * BatchNormalization state: gamma and beta are ordinary parameters (w_off, b_off); the
 * moving mean and variance live in the same arena right after them (s_off: C means then C
 * variances), so checkpoints, --dump-weights and exports carry them with no new format. The
 * optimizer leaves them alone because their gradient slot is zero when it runs: backward
 * writes scale * n * (batch mean, batch variance) into those slots (n examples of the slice,
 * scale = 1 / global batch), the gradient all-reduce sums them over the replicas (the
 * examples-weighted mean of the replicas' batch statistics, the same on every replica), and
 * mw_model_update_stats, called between the all-reduce and the optimizer, folds them into the
 * moving statistics (Keras: moving = moving * momentum + stat * (1 - momentum)) and zeroes
 * the slots. Adam and SGD leave a weight with a zero gradient and zero slots unchanged.
 * Batch statistics are taken over one forward call: the CPU and GPU backends run a BN
 * model's replica slice in one pass (see mw_model_has_batchnorm).
 *
 * Building is two-phase: add layers (shapes are checked here, once, so kernels
 * never have to), then mw_model_finalize allocates the parameter arena with a
 * view per tensor. Gradients and optimizer slots are separate arenas of the
 * same layout (worker/train). Activations live in a mw_model_ws sized for a
 * maximum batch, one per replica.
 *
 * Shapes are per example, Keras' channels_last: (H, W, C); Dense and Flatten
 * outputs are (1, 1, units).
 *
 * Models usually come from a Keras Sequential config (worker/keras/keras.h); the
 * built-in tutorial CNN is one too (worker/models/tutorial_cnn.json). A final
 * softmax is never computed as a layer: it is folded into the cross-entropy,
 * so the model's output stays logits. */
#ifndef MW_WORKER_MODEL_H
#define MW_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/arena.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/model/loss.h"

typedef enum {
    MW_LAYER_CONV2D,
    MW_LAYER_MAXPOOL,
    MW_LAYER_FLATTEN,
    MW_LAYER_DENSE,
    MW_LAYER_RELU,
    MW_LAYER_DROPOUT,   /* inverted dropout while training, identity otherwise */
    MW_LAYER_IDENTITY,  /* Activation('linear'), or the final softmax folded into the loss */
    MW_LAYER_BATCHNORM, /* axis -1: batch statistics while training, the moving ones else */
    MW_LAYER_AVGPOOL,   /* AveragePooling2D, and GlobalAveragePooling2D (flat output) */
    MW_LAYER_ZEROPAD,   /* ZeroPadding2D */
    MW_LAYER_ADD,       /* Add: the sum of its inputs (equal shapes) */
    MW_LAYER_MULTIPLY,  /* Multiply: the product of its two inputs */
    MW_LAYER_CONCAT,    /* Concatenate on the channel axis */
    MW_LAYER_ACT,       /* sigmoid, tanh, gelu, silu, elu, leaky_relu (act, alpha) */
    MW_LAYER_SOFTMAX,   /* a softmax computed as a layer (not the last one) */
    MW_LAYER_CROP,      /* Cropping2D (pad: the rows and columns cut) */
    MW_LAYER_EMBED,     /* Embedding: token ids (the model's input) -> vectors; vocab in pad[0] */
    MW_LAYER_LAYERNORM, /* LayerNormalization over the last axis (epsilon, gamma, beta) */
    MW_LAYER_MHA,       /* MultiHeadAttention (mha; inputs query, value and maybe key) */
    MW_LAYER_POSEMB,    /* KerasHub's PositionEmbedding: a table's first T rows (pad[1] rows) */
    MW_LAYER_KINDS      /* how many; each has its row in the layer table (layer.h) */
} mw_layer_kind;

#define MW_MAX_INPUTS 16 /* inputs of one merge layer */

typedef enum {
    MW_INIT_ZEROS,
    MW_INIT_ONES,
    MW_INIT_GLOROT_UNIFORM,
    MW_INIT_GLOROT_NORMAL,
    MW_INIT_HE_UNIFORM,
    MW_INIT_HE_NORMAL,
    MW_INIT_VARIANCE_SCALING, /* scale, mode, dist */
    MW_INIT_RANDOM_UNIFORM,   /* a = minval, b = maxval */
    MW_INIT_RANDOM_NORMAL,    /* a = mean, b = stddev */
    MW_INIT_TRUNCATED_NORMAL, /* a = mean, b = stddev, redrawn beyond 2 stddev */
    MW_INIT_CONSTANT,         /* a = value */
} mw_init_kind;

typedef enum { MW_FAN_IN, MW_FAN_OUT, MW_FAN_AVG } mw_fan_mode;
typedef enum { MW_DIST_TRUNCATED_NORMAL, MW_DIST_UNTRUNCATED_NORMAL, MW_DIST_UNIFORM } mw_dist;

/* A Keras initializer with its config values. The named kinds (Glorot, He)
 * ignore the other fields; {kind} alone is a valid initializer for them. */
typedef struct {
    mw_init_kind kind;
    double scale;     /* VarianceScaling: > 0 */
    mw_fan_mode mode; /* VarianceScaling */
    mw_dist dist;     /* VarianceScaling */
    double a, b;      /* see mw_init_kind */
} mw_init;

/* Keras L1L2: loss l1 * sum |w| + l2 * sum w^2 (L2 and L1 are the special cases). */
typedef struct mw_regularizer {
    double l1, l2;
} mw_regularizer;

typedef enum {
    MW_ACT_LINEAR,
    MW_ACT_RELU,
    MW_ACT_SOFTMAX,
    MW_ACT_SIGMOID,
    MW_ACT_TANH,
    MW_ACT_GELU,
    MW_ACT_SILU,
    MW_ACT_ELU,
    MW_ACT_LEAKY_RELU,
} mw_activation;

/* A layer's Keras dtype policy: float32, or mixed precision (float32 variables, optimizer
 * slots and loss; the layer computes in 16 bits). mixed_bfloat16 rounds every value a
 * bfloat16 tensor of Keras would hold (the layer's input, its matmul weights, its output, and
 * the gradient of its output) to bfloat16 and computes in float32 on those values; the
 * weights' gradients stay float32 (kernels/cast.h). mixed_float16 does the same with float16
 * values, the loss multiplied by loss_scale (below) so that small gradients do not underflow
 * float16's 2^-24; the training loop unscales and skips steps (worker/train.c). */
typedef enum { MW_POLICY_FLOAT32, MW_POLICY_MIXED_BFLOAT16, MW_POLICY_MIXED_FLOAT16 } mw_policy;

/* Keras' name of p ("float32", "mixed_bfloat16", "mixed_float16"). */
const char *mw_policy_name(mw_policy p);
/* 0 and *p for one of those names, -1 for anything else. */
int mw_policy_parse(const char *name, mw_policy *p);

/* MultiHeadAttention's shape (worker/model/layers/attention.c): the query is the layer's
 * input (1, T, in_c), the output (1, T, out_c). */
typedef struct {
    int heads, key_dim, value_dim;
    int steps;          /* S: the value's (and key's) steps */
    int value_c, key_c; /* the value's and the key's features */
    int causal;         /* use_causal_mask */
    int keys_only;      /* a padding mask on the query masks only the keys it attends to, the
                           query's rows stay (KerasHub's TransformerDecoder, whose attention
                           takes its mask as attention_mask); the output keeps the mask */
} mw_mha;

typedef struct mw_layer {
    mw_layer_kind kind;
    mw_policy policy;     /* float32 unless the Keras config or --dtype-policy says otherwise */
    const char *cls;      /* Keras class shown by the summary ("Conv2D", "Activation"); static */
    char name[96];        /* Keras-style: conv2d, conv2d_1, dense, ...; a block's part:
                             "<block>/<sublayer>" (transformer_encoder/self_attention_layer) */
    int in_h, in_w, in_c; /* per-example input shape */
    int out_h, out_w, out_c;
    mw_conv2d_geom conv;
    mw_pool_geom pool;
    int same; /* conv2d, maxpool: padding 'same' (1) or 'valid' (0) */
    /* parameters (conv2d, dense): offsets into the arenas, counts */
    size_t w_off, w_count, b_off, b_count;
    int has_bias;
    int fan_in, fan_out;
    mw_init kernel_init, bias_init;
    mw_regularizer kernel_reg, bias_reg;
    float rate;   /* dropout */
    int softmax;  /* identity standing for the final softmax (folded into the loss) */
    int in_place; /* output aliases input (relu, flatten, dropout, identity) */
    int folded;   /* a Keras layer's `activation`, shown with that layer */
    int flat;     /* the output is (batch, units) in Keras terms */
    int nin;      /* inputs: producer layer indices, -1 for the model's input */
    int in[MW_MAX_INPUTS];
    mw_act_kind act; /* MW_LAYER_ACT */
    float alpha;     /* MW_LAYER_ACT: elu alpha, leaky_relu negative slope */
    int global;      /* pooling over the whole image (Global*Pooling2D) */
    int mask_zero;   /* Embedding, TokenAndPositionEmbedding: ids 0 are padding, a mask its
                        consumers honour */
    int masked;      /* the inputs that carry an Embedding's padding mask, bit j for input j
                        (mw_model_plan_masks): GlobalAveragePooling1D takes the mean over the
                        steps that are not padding, MultiHeadAttention masks them, the others
                        pass the mask on */
    mw_mha mha;      /* MW_LAYER_MHA */
    int pad[4];      /* ZeroPadding2D, Cropping2D: top, bottom, left, right */
    /* BatchNormalization: gamma (w, when scale), beta (b, when center), then the moving
     * mean and variance at s_off (s_count = 2 C, not trainable) */
    size_t s_off, s_count;
    float momentum, epsilon;
    int sync; /* synchronized: batch statistics over every replica's slice (see below) */
    /* mixed_bfloat16 (set by mw_model_finalize): this layer's output, and its output's
     * gradient, need rounding; not where they are bfloat16 values by construction (ReLU or
     * max pooling of bfloat16 values, a reshape or a crop) */
    int round_out, round_grad;
    /* A part of a KerasHub block that this program builds from its own layers (a
     * TransformerEncoder: attention, dropouts, adds, LayerNormalizations, Dense layers): the
     * block is one Keras layer, named block_name, of class block_cls, whose .weights.h5 group
     * holds each part's under the attribute path part ("_self_attention_layer", ...). block is
     * the index of the block's first layer + 1 (0: not a part); part_rank the place of the
     * part's variables in the block's Keras weights (their order differs from the computation's:
     * a post-norm encoder's last LayerNormalization holds its second variables). */
    int block, part_rank;
    int block_first; /* the block's first layer, which stands for it (summary, files) */
    const char *block_cls, *part; /* static */
    char block_name[64];
} mw_layer;

typedef struct mw_model {
    mw_layer *layers; /* owned */
    int nlayers, cap;
    int in_h, in_w, in_c;
    int flat_input; /* the Keras input is (None, in_c) with in_h = in_w = 1 */
    char name[64];  /* the Keras model name, "sequential" by default */
    char *source;   /* owned copy of the Keras JSON the model was built from, or NULL */
    size_t source_nbytes;
    int nclasses;        /* width of the last layer */
    int positions;       /* the output's positions per example: 1, or a sequence's T (its
                            output (None, T, nclasses), a loss and metrics per position) */
    mw_loss loss;        /* its loss (worker/model/loss.h; mw_model_init: sparse softmax
                            cross-entropy from logits, accuracy) */
    int graph;           /* built as a Functional graph: the summary shows each layer's inputs */
    char input_name[64]; /* the graph's InputLayer, for the summary */
    int *next_in;        /* mw_model_set_inputs: inputs of the next added layer (owned) */
    int next_nin;
    mw_arena params; /* allocated by finalize */
    size_t nparams;  /* real parameters (without padding), BN moving statistics included */
    size_t nstate;   /* of which non-trainable (BN moving statistics) */
    int finalized;
    float loss_scale; /* mixed_float16: the loss is multiplied by it in the backward (a power
                         of 2, Keras' dynamic loss scale, set by the loop before each step);
                         0 (as initialized) or 1: none */
    struct mw_preprocess *pre; /* owned: the leading Keras preprocessing layers, or NULL */
    int *worder; /* owned, set by finalize: mw_model_weight_order, the packing's order */
} mw_model;

void mw_model_init(mw_model *m, int in_h, int in_w, int in_c);
void mw_model_free(mw_model *m);

/* Each add checks the new layer against the current output shape and returns
 * MW_EMODEL with a message naming the layer when it does not fit. A NULL name
 * gets Keras' automatic name (conv2d, conv2d_1, ...). */
mw_status mw_model_add_conv2d(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                              int sw, int same, int use_bias);
mw_status mw_model_add_maxpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same);
mw_status mw_model_add_flatten(mw_model *m, const char *name);
/* Keras Reshape(target_shape dims[0..nd), nd 1 to 3, one of them -1 at most): (d) flat,
 * (T, C) a sequence, (H, W, C) an image, the values in place. */
mw_status mw_model_add_reshape(mw_model *m, const char *name, const int *dims, int nd);
mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias);
/* folded = 1: the activation of the previous layer (Conv2D(..., activation='relu')). */
mw_status mw_model_add_relu(mw_model *m, const char *name, int folded);
/* Keras Dropout(rate), 0 <= rate < 1: inverted dropout while the workspace
 * says training (see mw_model_ws), the identity otherwise. */
mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate);
/* A Keras Activation layer: relu, linear (the identity) or softmax. */
mw_status mw_model_add_activation(mw_model *m, const char *name, mw_activation act);
/* The final softmax: folded = 1 for the previous layer's activation='softmax'
 * (hidden in the summary), 0 for a Keras Softmax layer. Computes nothing: the
 * cross-entropy applies it. Finalize fails unless it is the last layer. */
mw_status mw_model_add_softmax(mw_model *m, const char *name, int folded);
/* The inputs of the NEXT added layer (producer indices < nlayers, -1: the model input);
 * without it a layer reads the previous one. Graph builders call it before each add. */
mw_status mw_model_set_inputs(mw_model *m, const int *in, int nin);
/* Keras BatchNormalization(axis=-1, momentum, epsilon, center, scale, synchronized). */
mw_status mw_model_add_batchnorm(mw_model *m, const char *name, float momentum, float epsilon,
                                 int center, int scale, int sync);
/* AveragePooling2D (padded cells are not counted). */
mw_status mw_model_add_avgpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same);
/* GlobalAveragePooling2D (max = 0) or GlobalMaxPooling2D (max = 1): (None, C) outputs. */
mw_status mw_model_add_global_pool(mw_model *m, const char *name, int max, int one_d);
/* LayerNormalization(axis=-1, epsilon, center, scale): over each position's channels. */
mw_status mw_model_add_layernorm(mw_model *m, const char *name, float epsilon, int center,
                                 int scale);
/* Keras' padding mask (Embedding(mask_zero=True), TokenAndPositionEmbedding(mask_zero=True))
 * through the model, as Keras 3.15 propagates it in its graph and at run time (see
 * layers/embedding.c): the layers that keep the steps (Dropout, activations,
 * LayerNormalization, Dense on each position, Add, Multiply) pass it on, MultiHeadAttention
 * masks the padded steps of its query, value and key and passes the query's mask on,
 * GlobalAveragePooling1D takes the mean over the unmasked steps; every layer's masked says
 * which inputs carry it. A mask reaching any other layer is refused (MW_EUNSUPPORTED naming
 * the layer); one reaching the output sets loss.masked (Keras masks the loss and the metrics
 * with it). Called by mw_model_finalize. */
mw_status mw_model_plan_masks(mw_model *m);
/* Token ids travel as floats, exact below 2^24: the largest vocabulary. */
#define MW_EMBED_MAX_VOCAB (1 << 24)
/* Embedding(input_dim, output_dim): the model's input (None, T) of token ids (held as floats)
 * into (None, T, output_dim) (here (1, T, output_dim)); weights "embeddings" (input_dim,
 * output_dim), RandomUniform(-0.05, 0.05) unless the config says otherwise. The first layer
 * only: it reads the model's input. */
mw_status mw_model_add_embedding(mw_model *m, const char *name, int input_dim, int output_dim);
/* Positions a position table may hold (KerasHub's sequence_length). */
#define MW_KMAX_POSITIONS (1 << 20)
/* KerasHub's TokenAndPositionEmbedding(vocabulary_size, sequence_length, embedding_dim): an
 * Embedding (kind MW_LAYER_EMBED) whose output adds row t of a position table (positions rows,
 * pad[1]) at step t; the kernel block holds the token table, then the position table. */
mw_status mw_model_add_token_position(mw_model *m, const char *name, int vocab, int positions,
                                      int dim);
/* KerasHub's PositionEmbedding(sequence_length): (None, T, D) into the first T rows of a
 * (positions, D) table, for every example (the input's values unused; Add it to them). */
mw_status mw_model_add_position_embedding(mw_model *m, const char *name, int positions);
/* KerasHub's SinePositionEncoding(max_wavelength): (None, T, D) into the sinusoid of
 * kernels.h's mw_sine_pos_fn (kind MW_LAYER_POSEMB without a table; max_wavelength in alpha). */
mw_status mw_model_add_sine_position(mw_model *m, const char *name, float max_wavelength);
/* Keras MultiHeadAttention(num_heads, key_dim, value_dim, dropout, use_bias, output_shape
 * out_dim (0: the query's width)) called on the inputs set by mw_model_set_inputs (query,
 * value, and a key), with use_causal_mask causal. */
mw_status mw_model_add_mha(mw_model *m, const char *name, int heads, int key_dim, int value_dim,
                           int out_dim, int use_bias, float dropout, int causal);
/* Where the query, key, value and output kernels (w, wn floats) and biases (b, bn; 0 floats
 * without use_bias) of a MultiHeadAttention lie in its kernel block (offsets from w_off), in
 * Keras' order: kernel, bias, kernel, bias, ... */
void mw_mha_parts(const mw_layer *l, size_t w[4], size_t wn[4], size_t b[4], size_t bn[4]);
mw_status mw_model_add_zeropad(mw_model *m, const char *name, int top, int bottom, int left,
                               int right);
/* Merges of the inputs set by mw_model_set_inputs: Add (equal shapes), Multiply (two
 * inputs of equal shapes), Concatenate (channels; equal heights and widths). */
mw_status mw_model_add_add(mw_model *m, const char *name);
mw_status mw_model_add_multiply(mw_model *m, const char *name);
mw_status mw_model_add_concat(mw_model *m, const char *name);
/* Any activation as a layer (an Activation layer, or folded = 1: the previous layer's
 * activation=...); relu, linear and softmax go to the layers above. alpha: elu's alpha or
 * leaky_relu's negative slope. */
mw_status mw_model_add_act(mw_model *m, const char *name, mw_activation act, float alpha,
                           int folded);
/* Initializers of the last added layer's kernel and bias (NULL: keep Keras'
 * defaults, Glorot-uniform and zeros); MW_EINTERNAL when it has no weights. */
mw_status mw_model_set_init(mw_model *m, const mw_init *kernel, const mw_init *bias);
/* Regularizers of the last added layer's kernel and bias (NULL: none). */
mw_status mw_model_set_regularizer(mw_model *m, const mw_regularizer *kernel,
                                   const mw_regularizer *bias);
/* Allocate the parameter arena; padded to a multiple of pad_multiple floats so
 * collectives can cut it into equal shards. mw_model_plan then mw_model_alloc_params. */
mw_status mw_model_finalize(mw_model *m, size_t pad_multiple);
/* Everything mw_model_finalize does but the allocation: the graph checked, masks, in-place
 * and rounding planned, each tensor's offset reserved, nparams, nstate and params.count set
 * (params.data stays NULL). Enough for mw_model_summary and mw_model_ws_nbytes, so the
 * memory a model takes is known from its shapes before anything of that size is allocated. */
mw_status mw_model_plan(mw_model *m, size_t pad_multiple);
/* The planned parameter arena, zeroed; MW_ENOMEM names the parameter count and the largest
 * tensor's layer. Sets finalized. */
mw_status mw_model_alloc_params(mw_model *m);
/* Keras' initializers from the seed (each layer its own stream, so adding a
 * layer does not change the others' values). Fans as Keras computes them:
 * Conv2D kernel fan_in = KH*KW*C, fan_out = KH*KW*O; Dense (I, O); a bias of
 * n values has fan_in = fan_out = n. */
void mw_model_init_params(mw_model *m, uint64_t seed);

/* The layers in the order of Keras' model.weights into order[0..m->nlayers): model order,
 * except that a block's parts (mw_layer.block) come together, at the block's first layer, by
 * part_rank. Checkpoints, --dump-weights and the Keras files pack the parameters in it. */
void mw_model_weight_order(const mw_model *m, int *order);

/* Every layer's dtype policy becomes p (--dtype-policy). */
void mw_model_set_policy(mw_model *m, mw_policy p);
/* The model's 16-bit policy: mixed_float16 when a layer has it, else mixed_bfloat16 when a
 * layer has it, else float32. */
mw_policy mw_model_policy(const mw_model *m);

/* 1 when the model has a BatchNormalization layer (its training forward needs the whole
 * replica slice in one call). */
int mw_model_has_batchnorm(const mw_model *m);
/* After the all-reduce, before the optimizer: fold the summed batch statistics in grads
 * into the moving statistics in params and zero those gradient slots (arena layout, in kt's
 * memory: device arrays on the GPU, enqueued on k's stream behind the all-reduce). Nothing
 * without BatchNormalization. */
void mw_model_update_stats(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, float *params,
                           float *grads);
/* MW_EUNSUPPORTED naming the first layer whose op the table t lacks (a table may leave the
 * graph ops NULL); MW_OK when t runs every layer. */
mw_status mw_model_check_kernels(const mw_model *m, const mw_kernels *t);

/* m->loss_scale, or 1 where it is not set. */
static inline float mw_model_loss_scale(const mw_model *m)
{
    return m->loss_scale > 0 ? m->loss_scale : 1.0f;
}

/* Weight regularization (Keras kernel_regularizer / bias_regularizer):
 * adds scale * d(reg)/dw into grads (same layout as params; NULL: loss only)
 * and returns scale * reg, where reg = sum over tensors of
 * l1 * sum |w| + l2 * sum w^2 (d|w|/dw = sign(w), 0 at 0, as TensorFlow).
 *
 * Distributed training calls it once per replica per step with
 * scale = 1 / (total replicas), as tf.nn.scale_regularization_loss does: the
 * all-reduce SUM of the gradients then holds exactly one regularization
 * gradient, and the step loss (the sum of the replicas' losses) holds exactly
 * one regularization loss. A rank with R local replicas may instead call it
 * once with scale = R / (total replicas). 0 and no work without regularizers. */
double mw_model_regularization(const mw_model *m, float *grads, float scale);
/* The same through a kernel table, on arrays in the memory k's kernels work on (device
 * memory on CUDA): params and grads in the arena layout, and *acc (ONE double there) += the
 * penalty, with no synchronization. 1 when the model has a regularizer (work was enqueued),
 * 0 when not (nothing touched). */
int mw_model_regularize(const mw_model *m, const mw_kernels *t, const mw_kctx *k,
                        const float *params, float *grads, double *acc, float scale);
/* 1 when some layer has a kernel or bias regularizer. */
int mw_model_has_regularizers(const mw_model *m);

/* Per-replica activation workspace for batches of up to max_n examples.
 *
 * Dropout: the caller sets training, dropout_seed and example_ids before a
 * training forward (mw_model_ws_alloc leaves inference: 0, 0, NULL). The mask
 * of example j is keyed by (dropout_seed, layer index, example_ids[j]), so the
 * same global example gets the same mask in any batch position, micro-batch
 * or cluster layout; use one dropout_seed per step on every replica.
 * example_ids NULL numbers the batch 0..n-1. A backward must follow its own
 * forward with the same settings (it uses the saved mask). */
typedef struct mw_model_ws {
    int max_n;
    int training;                /* 1: dropout active */
    uint64_t dropout_seed;       /* per step, the same on every replica */
    const uint32_t *example_ids; /* n global example ids of act[0] (borrowed), or NULL */
    float **act;                 /* nlayers + 1 views: act[0] input, act[i+1] output of layer i */
    float **grad;                /* same shapes; grad[0] unused */
    void **buf;           /* per layer: the buffer its row keeps between forward and backward (a
                             maxpool's argmax, a dropout mask, BN's batch mean, variance and 1/stddev),
                             else NULL */
    float *prob;          /* (max_n, nclasses): the output as Keras' metrics see it (the loss's) */
    float *loss;          /* (max_n) per-example losses */
    void *y;              /* (max_n) targets: int32 labels or nclasses floats each (the loss's
                             mw_loss_target_bytes) */
    float *w;             /* (n) sample weights of the batch, or NULL (all 1): each example's
                             loss, and its gradient, times its weight (set with the batch) */
    float *w_buf;         /* (max_n): where a host batch's weights go */
    float *scratch;       /* kernel workspace (NULL in a workspace from mw_model_ws_alloc_with) */
    size_t scratch_count; /* floats the kernels want (with _alloc_with: to reserve elsewhere) */
    const float *params;  /* the parameters forward/backward read; NULL: m->params.data */
    float *params16;      /* a mixed policy: the weights of its matmul layers rounded to 16
                             bits, made by each forward from layer 0 (else NULL) */
    void *block;          /* the single owned allocation behind act/grad/... */
    size_t nbytes;        /* block's size: mw_model_ws_nbytes (host) or less scratch (device) */
    void (*block_free)(void *); /* how block is released; NULL: the host allocator */
} mw_model_ws;

void mw_model_ws_init(mw_model_ws *ws);
mw_status mw_model_ws_alloc(mw_model_ws *ws, const mw_model *m, int max_n);
/* The same layout in memory from alloc_fn / free_fn (e.g. mw_cuda_alloc and
 * mw_cuda_free: a device workspace, whose act/grad/prob/loss/y/... are
 * device pointers). The kernel scratch is not part of it: ws->scratch is NULL
 * and ws->scratch_count says how many floats to give the kernel context
 * (mw_cuda_ws_reserve). The workspace's pointer tables stay on the host. */
mw_status mw_model_ws_alloc_with(mw_model_ws *ws, const mw_model *m, int max_n,
                                 mw_status (*alloc_fn)(void **p, size_t nbytes),
                                 void (*free_fn)(void *p));
void mw_model_ws_free(mw_model_ws *ws);
/* The bytes mw_model_ws_alloc(ws, m, max_n) takes for its block (activations, gradients,
 * argmax and dropout masks, probabilities, losses, targets, kernel scratch), computed from
 * the same plan without allocating: what one workspace costs before it is made. */
size_t mw_model_ws_nbytes(const mw_model *m, int max_n);

/* Forward for n examples already in ws->act[0] (and targets in ws->y, weights in ws->w):
 * fills logits, prob and per-example losses. Parameters come from ws->params
 * (NULL: m->params.data), and every buffer is in the memory the kernel table
 * works on (host, or device for the CUDA table with a device workspace). */
void mw_model_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      int n);
/* Backward from the losses scaled by `scale` (1 / global batch): ACCUMULATES
 * into the gradient arena grads (same layout as params). */
void mw_model_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                       float *grads, int n, float scale);
/* Layers [from, to) of the forward (to == nlayers: the loss too), and of the backward in
 * reverse (to == nlayers: first the loss's gradient, zeroing the accumulated input
 * gradients); the whole passes are from = 0, to = nlayers. */
void mw_model_forward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int n, int from, int to);
void mw_model_backward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int n, float scale, int from, int to);

/* Synchronized BatchNormalization (Keras' synchronized=True): a layer whose batch statistics,
 * and the two sums of its backward, are taken over every replica's slice of the global
 * batch, so any layout trains the same model. A backend runs its replicas in lockstep: the
 * parts between synchronized layers with the functions above; at synchronized layer i, each
 * replica's sums (mw_model_sync_sums, 2 C doubles), SUMMED over every replica of the cluster,
 * go to each replica's mw_model_sync_forward (total: the examples of the global batch); the
 * backward likewise, with backward = 1 (whose sums also add the slice's gamma / beta
 * gradients into grads) and mw_model_sync_backward (dx, and the slice's share of the moving
 * statistics, as an unsynchronized layer adds them). mw_model_forward alone runs a synchronized
 * layer on its own slice: one replica. */
int mw_model_is_sync(const mw_model *m, int i);
int mw_model_has_sync(const mw_model *m);
/* The most channels of a synchronized layer (its sums are 2 C doubles); 0 when none. */
int mw_model_sync_channels(const mw_model *m);
void mw_model_sync_sums(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model_ws *ws, float *grads, int i, int n, int backward, double *s);
void mw_model_sync_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int i, int n, const double *s, long total);
void mw_model_sync_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int i, int n, float scale,
                            const double *s, long total);
/* Bytes of one example's targets: the loss's (mw_loss_target_bytes) per position. */
size_t mw_model_target_bytes(const mw_model *m);
/* The loss's metrics as the model reports them (mw_loss_metrics, per position). */
mw_metric_list mw_model_metrics(const mw_model *m);
/* After a forward on the host: the n examples' values of the loss's metrics
 * (mw_loss_metrics: the number right for an accuracy) added into acc (MW_SUMS doubles). */
void mw_model_metrics_add(const mw_model *m, const mw_model_ws *ws, int n, double *acc);

/* Whether a and b compute the same function given the same weights: 0 when they do, else 1
 * with `what` (len bytes, may be NULL when len is 0) naming the FIRST difference for a user,
 * a being described as the checkpoint's model and b as --model's:
 *
 *   layer 3 (dense_1): activation relu in the checkpoint, linear in --model
 *   the checkpoint has 8 layers, --model 7; the first difference is layer 2 (...): ...
 *
 * Layers are counted as Keras and the summary count them (0-based; an activation='relu'
 * belongs to its Conv2D or Dense). Compared, per layer: what it computes (its Keras class,
 * with Activation('relu') = ReLU() and Activation('softmax') = Softmax()); input shape;
 * Conv2D filters, kernel size, strides, padding (the padding the geometry gives, so 'same'
 * and 'valid' that pad alike are equal); MaxPooling2D pool size, strides, padding; Dense
 * units; use_bias; the activation (linear, relu, softmax; a final softmax counts although it
 * is folded into the loss); kernel and bias regularizers (they change the loss); the
 * Dropout rate; output shape. Not compared: layer and model names, initializers (restored
 * weights replace them). Either model may be finalized or not. */
int mw_model_diff(const mw_model *a, const mw_model *b, char *what, size_t len);

/* Print a Keras-like summary table (layer (class), output shape, params, total):
 * a layer's folded activation is part of its row; Dropout, Activation, ReLU
 * and Softmax layers get their own rows with 0 parameters. */
void mw_model_summary(const mw_model *m, FILE *f);

#endif
