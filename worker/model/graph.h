/* The model's data: a graph of layers (mw_layer) in topological order (mw_model), and the
 * types of their settings. model.h says how a model is built, run and trained; this header
 * is what the passes over a model's layers (the layer table's rows, the padding mask's plan,
 * the Keras files) read, without model.c's functions. */
#ifndef MW_WORKER_MODEL_GRAPH_H
#define MW_WORKER_MODEL_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "kernels/kernels.h"
#include "worker/model/inputs.h"
#include "worker/model/layer_list.h"
#include "worker/model/loss.h"

#define MW_LAYER_KIND_(K, row) MW_LAYER_##K,
#define MW_LAYER_NO_KIND_(row)
typedef enum {
    MW_LAYER_LIST(MW_LAYER_KIND_, MW_LAYER_NO_KIND_) /* layer_list.h */
    MW_LAYER_KINDS /* how many; each has its row in the layer table (layer.h) */
} mw_layer_kind;
#undef MW_LAYER_KIND_
#undef MW_LAYER_NO_KIND_

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

/* A layer's Keras dtype policy: float32, or mixed precision (float32 variables, optimizer
 * slots and loss; the layer computes in 16 bits). mixed_bfloat16 rounds every value a
 * bfloat16 tensor of Keras would hold (the layer's input, its matmul weights, its output, and
 * the gradient of its output) to bfloat16 and computes in float32 on those values; the
 * weights' gradients stay float32 (kernels/cast.h). mixed_float16 does the same with float16
 * values, the loss multiplied by loss_scale (below) so that small gradients do not underflow
 * float16's 2^-24; the training loop unscales and skips steps (worker/train.c). */
typedef enum { MW_POLICY_FLOAT32, MW_POLICY_MIXED_BFLOAT16, MW_POLICY_MIXED_FLOAT16 } mw_policy;

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
    int kmask;          /* 1 + the producer of a padding mask given as a tensor (a KerasHub
                           block's padding_mask argument: a named input, nonzero where a key
                           counts), which masks the keys only; 0: none */
    int kv_heads;       /* key and value heads (grouped-query attention), dividing heads: the
                           key and value projections have kv_heads heads, query head h reads
                           head h / (heads / kv_heads); heads for MultiHeadAttention */
    int rope;           /* the projected query and key rotated per head (mw_layer.rope, width
                           key_dim) before they attend: KerasHub's LlamaAttention */
    int llama;          /* KerasHub's LlamaAttention: its sublayers' names in .weights.h5 */
    int gemma;          /* KerasHub's CachedGemmaAttention (with llama): its sublayers' names,
                           its query, key and value kernels heads-first in Keras ((H, D, dk):
                           mw_keras_var.swap01), a query step with every key masked 0 */
    float soft_cap;     /* its logit_soft_cap (mw_attn_geom.soft_cap); 0: none */
    int window;         /* its sliding window (mw_attn_geom.window); 0: none */
    int recompute;      /* --attention-memory recompute: the probabilities are not kept from the
                           forward; the backward recomputes each example's (an execution detail:
                           the same values) */
} mw_mha;

/* KerasHub's RotaryEmbedding (worker/model/layers/rope.c): each position's features rotated
 * in groups of width (the layer alone: all of them) by angles of the position. */
typedef struct {
    float max_wavelength, scale; /* the frequencies' base; scaling_factor */
    int width;                   /* the features each rotation takes (its halves paired) */
    int denom;                   /* the exponents' denominator: denominator_dim, else width */
} mw_rope;

/* A Keras model used as a layer of another (a Sequential or Functional inside a Functional:
 * ConvNeXt's stem), whose layers the reader adds in its place (worker/keras/keras_graph.h). Its
 * layers' weights live in its own group of .weights.h5: layers/<path>/layers/<key>/vars. */
#define MW_MAX_NESTS 64
typedef struct {
    char path[128]; /* its group under layers/: "sequential", "functional/layers/sequential" */
    char name[64];  /* its Keras name */
} mw_nest;

typedef struct mw_layer {
    mw_layer_kind kind;
    mw_policy policy;     /* float32 unless the Keras config or --dtype-policy says otherwise */
    int op;               /* a Keras operation (x * c, x + y): its policy is its inputs' */
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
    int bcast;       /* Add, Multiply: an input's shape differs from the output's (broadcast) */
    float kscale;    /* Add: the factor of every input after the first (1; CustomScaleLayer's
                        scale: x + r scale); Add, Multiply of one input: the constant operand */
    int konst;       /* Add, Multiply: one tensor and the constant kscale (x + 3.0, x * (1 / 6)) */
    int mask_zero;   /* Embedding, TokenAndPositionEmbedding: ids 0 are padding, a mask its
                        consumers honour */
    int masked;      /* the inputs that carry an Embedding's padding mask, bit j for input j
                        (mw_masks_plan): GlobalAveragePooling1D takes the mean over the
                        steps that are not padding, MultiHeadAttention masks them, the others
                        pass the mask on */
    mw_mha mha;      /* MW_LAYER_MHA */
    mw_rope rope;    /* MW_LAYER_ROPE */
    int pad[4];      /* ZeroPadding2D, Cropping2D: top, bottom, left, right */
    int out_pad[2];  /* Conv2DTranspose: output_padding (rows, columns), -1 for None */
    int bilinear;    /* UpSampling2D: interpolation "bilinear" (0: "nearest"); factors in pool */
    int vocab;       /* Embedding: input_dim, the token table's rows */
    int positions;   /* TokenAndPositionEmbedding, PositionEmbedding: sequence_length, the
                        position table's rows (0: none, a plain Embedding's or a sine's) */
    int part_off;    /* MW_LAYER_INPUT: where its part begins in the model input's row */
    int kerashub;    /* KerasHub's TokenAndPositionEmbedding: its padding mask travels on its
                        output tensor only, never in the graph (masks.c) */
    int tied;        /* MW_LAYER_REVEMB: 1 + the Embedding layer whose table it uses (its
                        kernel, transposed: no weights of its own, its gradient added there) */
    int untied;      /* a ReversibleEmbedding(tie_weights=False): its reverse call's own kernel
                        (D, V) after the (V, D) table in its weights */
    /* BatchNormalization: gamma (w, when scale), beta (b, when center), then the moving
     * mean and variance at stats_off (stats_count = 2 C, not trainable) */
    size_t stats_off, stats_count;
    float momentum, epsilon; /* the normalizations' */
    int groups;              /* GroupNormalization: channel groups (C / groups channels each) */
    int rms_class; /* MW_LAYER_RMSNORM: the Keras class it computes as (layers/rmsnorm.h) */
    int sync;      /* synchronized: batch statistics over every replica's slice (see below) */
    /* mixed_bfloat16 (set by mw_model_finalize): this layer's output, and its output's
     * gradient, need rounding; not where they are bfloat16 values by construction (ReLU or
     * max pooling of bfloat16 values, a reshape or a crop) */
    int round_out, round_grad;
    int fuse_norm;       /* a residual Add whose sum layer i + 1 normalizes: the two run as one call
                            of the norm row's add_forward / add_backward (plan.c: plan_fusion) */
    int fuse_relu;       /* a normalization whose output layer i + 1, a ReLU in place, clips to
                            [0, fuse_relu_max]: the two run as one call of this row's relu_forward
                            / relu_backward (plan.c: plan_fusion) */
    float fuse_relu_max; /* that ReLU's max_value (INFINITY: none) */
    /* A Dense whose output layer i + 1, an activation (ReLU without slope or threshold, or
     * Activation's functions), reads: the two run as one call of this row's act_forward, which
     * writes both layers' outputs (plan.c: plan_fusion); the backward is the two layers'. */
    int fuse_act;
    mw_act_kind fuse_act_kind; /* that activation: act_fwd's kind, or MW_ACTK_RELU */
    float fuse_act_alpha;      /* its alpha, or the ReLU's max_value (INFINITY: none) */
    /* Bit j: this layer's backward is the first (the consumer of highest index) to add into
     * the gradient of its input j, so it zeroes that gradient just before (model.c:
     * plan_grad_zero); not an in-place layer's input, whose gradient is its own output's. */
    unsigned zero_in;
    /* A part of a KerasHub block that this program builds from its own layers (a
     * TransformerEncoder: attention, dropouts, adds, LayerNormalizations, Dense layers): the
     * block is one Keras layer, named block_name, of class block_cls, whose .weights.h5 group
     * holds each part's under the attribute path part ("_self_attention_layer", a ViTEncoder's
     * "encoder_layers/vi_t_encoder_block_1/mha", ...). block is
     * the index of the block's first layer + 1 (0: not a part); part_rank the place of the
     * part's variables in the block's Keras weights (their order differs from the computation's:
     * a post-norm encoder's last LayerNormalization holds its second variables). */
    int block, part_rank;
    int block_first;       /* the block's first layer, which stands for it (summary, files) */
    int nest;              /* the nested model it belongs to: mw_model.nests[nest - 1]; 0: none */
    const char *block_cls; /* static */
    char part[64];         /* "" for the block's own variables and its arithmetic */
    char block_name[64];
    /* ReLU(max_value, negative_slope, threshold) (MW_LAYER_RELUX; alpha is negative_slope):
     * max_value INFINITY when none */
    float relu_max, relu_threshold;
    /* Dropout's mask (mw_dropout_noise, layers/dropout.h): one per value, per example or per
     * (example, channel); noise_rank: the axes of its Keras noise_shape after the batch */
    int noise, noise_rank;
    mw_rescale rescale; /* Rescaling as a layer: scale and offset, one pair or per channel */
} mw_layer;

typedef struct mw_model {
    mw_layer *layers; /* owned */
    int nlayers, cap;
    int in_h, in_w, in_c;
    int flat_input; /* the Keras input is (None, in_c) with in_h = in_w = 1 */
    char name[64];  /* the Keras model name, "sequential" by default */
    char *source;   /* owned copy of the Keras JSON the model was built from, or NULL */
    size_t source_nbytes;
    int nclasses;         /* width of the last layer */
    int positions;        /* the output's positions per example: 1, a sequence's T (its
                             output (None, T, nclasses), a loss and metrics per position), or
                             an image's H x W (None, H, W, nclasses): one per pixel */
    mw_loss loss;         /* its loss (worker/model/loss.h; mw_model_init: sparse softmax
                             cross-entropy from logits, accuracy) */
    int graph;            /* built as a Functional graph: the summary shows each layer's inputs */
    char input_name[64];  /* the graph's InputLayer, for the summary */
    mw_input_parts parts; /* several named inputs: what each example's input row holds (the
                             data's), each taken out by an InputLayer (MW_LAYER_INPUT); n 0 for
                             one input */
    int mask_t;           /* the tensor whose nonzero values mark the steps an Embedding's
                             padding mask keeps (its ids): 0, the model's input, or a named
                             input's InputLayer output (its layer index + 1) */
    int *next_in;         /* mw_model_set_inputs: inputs of the next added layer (owned) */
    int next_nin;
    mw_arena params; /* allocated by finalize */
    size_t nparams;  /* real parameters (without padding), BN moving statistics included */
    size_t nstate;   /* of which non-trainable (BN moving statistics) */
    int finalized;
    float loss_scale; /* mixed_float16: the loss is multiplied by it in the backward (a power
                         of 2, Keras' dynamic loss scale, set by the loop before each step);
                         0 (as initialized) or 1: none */
    /* The leading Keras preprocessing layers, or NULL: the model describes them (the summary,
     * the checkpoint's comparison), the data side builds and runs them (worker/data/
     * preprocess.h) and sets pre_free, which mw_model_free calls. A function pointer rather
     * than the pipeline's own close: the model stays below the data side (it includes nothing
     * of worker/data/), while every reader of a model still finds its pipeline beside its
     * layers, built and released with them. */
    struct mw_preprocess *pre;
    void (*pre_free)(struct mw_preprocess **pre);
    int *worder; /* owned, set by finalize: mw_model_weight_order, the packing's order */
    mw_nest nests[MW_MAX_NESTS]; /* the nested models, each after the one it is in */
    int nnests;
} mw_model;

/* The Keras layer behind output idx, for messages: a folded activation's own layer. */
static inline const char *mw_model_producer_name(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    return idx < 0 ? (m->input_name[0] ? m->input_name : "the model input") : m->layers[idx].name;
}

#endif
