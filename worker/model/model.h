/* The model: a graph of layers in topological order over one flat parameter arena.
 *
 * Each layer names its input tensors by their producers (layer indices, -1 for the model's
 * input); a Sequential model is the chain where layer i reads layer i-1. Tensors: act[0] is
 * the input, act[i+1] the output of layer i. A tensor read by several layers gets the SUM of
 * their gradients (each consumer accumulates); a layer runs in place (its output aliases its
 * input) only when it is its input's sole consumer. The last layer is the model's output.
 *
 * BatchNormalization state: gamma and beta are ordinary parameters (w_off, b_off); the
 * moving mean and variance live in the same arena right after them (stats_off: C means then C
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
 * Building is two-phase: add layers with their families' builders (layers/<family>.h; shapes
 * are checked there, once, so kernels never have to), then mw_model_finalize plans the
 * padding mask (masks.h) and allocates the parameter arena with a view per tensor. Gradients and
 * optimizer slots are separate arenas of the same layout (worker/train). Activations live in a
 * mw_model_ws sized for a maximum batch, one per replica.
 *
 * Shapes are per example, Keras' channels_last: (H, W, C); Dense and Flatten
 * outputs are (1, 1, units).
 *
 * Models come from a Keras model (a Sequential or Functional config, a .keras archive:
 * worker/keras/keras.h, which reads each layer through its row, layer.h); the built-in
 * tutorial CNN is one too (worker/models/tutorial_cnn.json). A final softmax is never
 * computed as a layer: it is folded into the cross-entropy, so the model's output stays
 * logits. The model's types are graph.h's; this header declares model.c's functions. */
#ifndef MW_WORKER_MODEL_H
#define MW_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/arena.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/model/graph.h"
#include "worker/model/loss.h"

struct mw_layer_call; /* layer.h */

/* Keras' name of p ("float32", "mixed_bfloat16", "mixed_float16"). */
const char *mw_policy_name(mw_policy p);
/* 0 and *p for one of those names, -1 for anything else. */
int mw_policy_parse(const char *name, mw_policy *p);
/* The kernels' 16-bit format of p: 0 float32, 1 bfloat16, 2 float16 (mw_attn_geom.half, the
 * rope kernels' half). */
int mw_policy_half(mw_policy p);

void mw_model_init(mw_model *m, int in_h, int in_w, int in_c);
void mw_model_free(mw_model *m);

/* The inputs of the NEXT added layer (producer indices < nlayers, -1: the model input);
 * without it a layer reads the previous one. Graph builders call it before each add. */
mw_status mw_model_set_inputs(mw_model *m, const int *in, int nin);
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

/* The layers in the order of Keras' model.weights into order[0..m->nlayers): model order,
 * except that a block's parts (mw_layer.block) come together, at the block's first layer, by
 * part_rank. Checkpoints, --dump-weights and the Keras files pack the parameters in it. */
void mw_model_weight_order(const mw_model *m, int *order);

/* Every layer's dtype policy becomes p (--dtype-policy). */
void mw_model_set_policy(mw_model *m, mw_policy p);
/* The model's 16-bit policy: mixed_float16 when a layer has it, else mixed_bfloat16 when a
 * layer has it, else float32. */
mw_policy mw_model_policy(const mw_model *m);

/* MW_EUNSUPPORTED naming the first layer whose op the table t lacks (a table may leave the
 * graph ops NULL); MW_OK when t runs every layer. */
mw_status mw_model_check_kernels(const mw_model *m, const mw_kernels *t);

/* m->loss_scale, or 1 where it is not set. */
static inline float mw_model_loss_scale(const mw_model *m)
{
    return m->loss_scale > 0 ? m->loss_scale : 1.0f;
}

/* Per-replica activation workspace for batches of up to max_n examples.
 *
 * Dropout: the caller sets training, dropout_seed and example_ids before a
 * training forward (mw_model_ws_alloc leaves inference: 0, 0, NULL). The mask
 * of example j is keyed by (dropout_seed, layer index, example_ids[j]), so the
 * same global example gets the same mask in any batch position, micro-batch
 * or cluster layout; use one dropout_seed per step on every replica.
 * example_ids NULL numbers the batch 0..n-1. A backward must follow its own
 * forward with the same settings (it uses the saved mask). Made and freed by model_ws.h. */
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
    /* NULL, or called by the backward after each layer's, with its index (descending): the
     * layer's parameter gradients are complete for this backward (worker/replicas/overlap.h) */
    void (*layer_done)(void *ctx, int layer);
    void *layer_done_ctx;
} mw_model_ws;

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
 * reverse (to == nlayers: first the loss's gradient); the whole passes are from = 0, to =
 * nlayers. Each layer's backward adds into its inputs' gradients, each of which is zeroed
 * just before the first backward that adds into it (mw_model_zero_inputs). */
void mw_model_forward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int n, int from, int to);
void mw_model_backward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int n, float scale, int from, int to);
/* Zero the gradients of layer i's inputs (n examples) whose first adder in the backward it
 * is; a backward run outside mw_model_backward_part (mw_model_sync_backward) does it first. */
void mw_model_zero_inputs(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                          const mw_model_ws *ws, int i, int n);

/* Bytes of one example's targets: the loss's (mw_loss_target_bytes) per position. */
size_t mw_model_target_bytes(const mw_model *m);
/* The loss's metrics as the model reports them (mw_loss_metrics, per position). */
mw_metric_list mw_model_metrics(const mw_model *m);
/* After a forward on the host: the n examples' values of the loss's metrics
 * (mw_loss_metrics: the number right for an accuracy) added into acc (MW_SUMS doubles). */
void mw_model_metrics_add(const mw_model *m, const mw_model_ws *ws, int n, double *acc);

/* ---- what model.c gives the layer table's rows (layer.h) ---- */

/* Append a layer of kind and Keras class cls reading the current output (or the inputs set
 * by mw_model_set_inputs); NULL (mw_err set) on error. An empty name gets Keras' automatic one:
 * auto_base, then auto_base_1, ... counted over the shown layers of the same class. */
struct mw_layer *mw_layer_push(struct mw_model *m, int kind, const char *name, const char *cls,
                               const char *auto_base);
/* The same for a parameter-free layer that keeps its input's shape and runs in place. */
struct mw_layer *mw_layer_push_same(struct mw_model *m, int kind, const char *name, const char *cls,
                                    const char *auto_base);
/* Take back the layer just pushed; returns s. */
mw_status mw_layer_reject(struct mw_model *m, mw_status s);
/* Output values per example. */
size_t mw_layer_out_count(const struct mw_layer *l);
/* Values per example of tensor t (0: the input, i + 1: layer i's output). */
size_t mw_model_tensor_count(const struct mw_model *m, int t);
/* The shape of layer idx's output (-1: the model's input). */
void mw_model_shape_of(const struct mw_model *m, int idx, int s[3]);
/* y = 0, and y = x, through the table (device memory on a GPU). */
void mw_layer_zero(const mw_kernels *kt, const mw_kctx *k, void *p, size_t nbytes);
void mw_layer_copy(const mw_kernels *kt, const mw_kctx *k, float *y, const float *x, size_t count);
/* x rounded in place to the 16 bits of mw_policy policy (kernels/cast.h). */
void mw_layer_round(const mw_kernels *kt, const mw_kctx *k, int policy, float *x, size_t count);
/* A row's stays_16bit for a layer that selects, copies or zeroes: 16-bit values stay 16-bit both
 * ways. */
int mw_layer_stays_16bit_always(const struct mw_layer *l, int backward);
/* A layer that computes nothing (Flatten, an identity, Dropout at inference): y = x unless in
 * place; and its backward, dx += dy unless in place. */
void mw_layer_pass_fwd(const struct mw_layer_call *c);
void mw_layer_pass_bwd(const struct mw_layer_call *c);
/* The buffer an elementwise backward writes: dx itself in place (dy is dx), else dy (no longer
 * needed: every consumer of the output has run); mw_layer_pass_bwd then adds it into dx. */
float *mw_layer_bwd_out(const struct mw_layer_call *c);

#endif
