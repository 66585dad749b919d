/* The layer table: what a layer family is to the model, stated once.
 *
 * Each family (worker/model/layers/, one file each) defines one row, an mw_layer_ops, for each
 * mw_layer_kind it implements; layer_list.h lists the kinds and rows once, layer.c makes the
 * table, and the model's passes (model.c, masks.c, weights.c, diff.c, the Keras files) reach a
 * layer only through its row: forward and backward through the kernel table, the workspace
 * buffer it keeps between them, whether it keeps 16-bit values 16-bit (so mixed precision
 * rounds only where needed), the kernel entries it needs, how two instances differ, how it
 * treats a padding mask, its initializer when it has several tensors, the Keras classes it
 * reads and the Keras variables it has. A family's file also holds its builders, declared in
 * its own header (layers/<family>.h): they check the new layer against its input shape and
 * set its output shape and parameter counts; a NULL name gets Keras' automatic one.
 *
 * A new layer that reuses existing kernels is its family's file (its row), its header when
 * others call its builder, and one line in layer_list.h. */
#ifndef MW_WORKER_MODEL_LAYER_H
#define MW_WORKER_MODEL_LAYER_H

#include <stddef.h>

#include <jansson.h>

#include "common/rng.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/model/kvars.h"

/* The model's types (model.h). The table names them only by their tags, so that model.c reaches
 * the layers through it while the layers' files use the model's types: no include circle. */
struct mw_model;
struct mw_layer;
struct mw_model_ws;
struct mw_regularizer;

/* One layer's forward or backward: what the model hands the row. */
typedef struct mw_layer_call {
    const struct mw_model *m;
    const struct mw_layer *l;
    const mw_kernels *kt;
    const mw_kctx *k;             /* bf16 / f16 set from the layer's policy */
    const struct mw_model_ws *ws; /* its tensors: act[l->in[j] + 1] inputs, act[i + 1] output */
    const float *P;               /* the parameters it computes with (16-bit rounded matmul weights
                                     under a mixed policy) */
    float *G;                     /* backward: the gradient arena, accumulated into */
    float scale;                  /* backward: the loss scale of the moving statistics (1 / global
                                     batch) */
    int i, n;                     /* the layer's index, the examples */
    float *x, *y;                 /* its first input and its output */
    float *dx, *dy;               /* their gradients; dx NULL when the input is the model's */
    unsigned dx_set;              /* backward: bit j, input j's gradient holds stale values, to
                                     be written, not added into (only for a row with sets_dx;
                                     the model's plan_grad_zero); bit 0 is dx's */
    void *buf;                    /* its workspace buffer (buf_bytes), else NULL */
    size_t cnt, rows;             /* n * output values per example; n * out_h * out_w */
} mw_layer_call;

/* How a layer treats a padding mask that reaches it (the plan: masks.h). */
typedef enum {
    MW_MASK_REFUSE,      /* it cannot honour one: a mask reaching it is refused (MW_EUNSUPPORTED) */
    MW_MASK_PASS,        /* it keeps the steps and passes the mask on; with several inputs only when
                            every input has it (Keras 3.15's Merge.compute_mask: an input without a
                            mask, such as a PositionEmbedding's output, drops it) */
    MW_MASK_TAKE,        /* it uses the mask (mw_layer.masked says which inputs carry it) and its
                            output has none: GlobalAveragePooling1D's masked mean */
    MW_MASK_DROP,        /* it accepts and ignores the mask, as Keras drops it there (a layer that
                            does not support masking but computes no step from another) */
    MW_MASK_MAKE,        /* it makes the mask, in the graph and on its output tensor (Embedding with
                            mask_zero) */
    MW_MASK_MAKE_AT_RUN, /* it makes the mask on its output tensor only, never in the graph
                            (KerasHub's TokenAndPositionEmbedding with mask_zero) */
    MW_MASK_ATTEND,      /* MultiHeadAttention: masks the padded steps of its query, value and key
                            (mw_mha.keys_only), passes the query's mask on in the graph and takes the
                            tensors' masks away at run time */
} mw_mask_rule;

/* The Keras model reader's state for one layer (worker/model/kread.h). */
typedef struct mw_kread mw_kread;

/* Keras class names a row reads, at most (the last entry of a full list is NULL). */
#define MW_LAYER_KERAS_MAX 8
/* The prefix of a KerasHub class in a row's keras[] (its registered_name in a Keras file). */
#define MW_LAYER_KERAS_HUB "keras_hub>"

typedef struct {
    /* The Keras class names it reads (NULL-terminated); none for the kinds the model makes
     * itself (a computed softmax). */
    const char *keras[MW_LAYER_KERAS_MAX];
    /* The module a .keras config names for its classes when they are keras.applications' own
     * (ConvNeXt's LayerScale: "keras.src.applications.convnext"); the reader accepts them from
     * it alone. NULL: Keras' built-in layers (and KerasHub's, by registered_name). */
    const char *module;
    /* Keras config -> mw_model_add_*: R names the layer for messages and holds the model. */
    mw_status (*parse)(mw_kread *R, const char *cls, const json_t *cfg, const char *name);
    void (*forward)(const mw_layer_call *c);
    /* Accumulates into dx (every input's gradient) and the weights' gradients in G; a layer in
     * place (l->in_place) overwrites dy, which is dx. With c->dx_set (a row with sets_dx) it
     * writes every value of dx instead. */
    void (*backward)(const mw_layer_call *c);
    /* 1: backward honours c->dx_set, so the model does not zero the gradient of the input
     * whose first adder it is (one input) but has it written: one pass over that tensor fewer
     * (a tenth of MobileNetV2's step was zeroing); 2: the same for each of its inputs, bit j
     * of c->dx_set for input j (Add). */
    int sets_dx;
    /* A normalization fused with the residual Add before it (the model's plan_fusion, an
     * execution detail): add_forward writes the sum a + b into c->x, as Add would, and the
     * norm's output, in one pass over each row; add_backward adds ds + the norm's input gradient
     * (c->dx holds ds, the sum's gradient from its other consumers) into da and db (NULL: the
     * model's input), and the parameters' gradients as backward does. The same bits as Add's
     * forward then the norm's, and the norm's backward then Add's. NULL: it does not fuse. */
    void (*add_forward)(const mw_layer_call *c, const float *a, const float *b);
    void (*add_backward)(const mw_layer_call *c, float *da, float *db);
    /* A normalization fused with the ReLU after it (plan_fusion; the ReLU in place over its
     * output, max_value M, slope and threshold 0): relu_forward writes the clipped output and
     * returns 1, or returns 0 when it cannot (not training, a table without the kernel) and the
     * two layers run on their own; relu_backward is backward with c->dy masked by the ReLU's
     * slope (c->dy: the ReLU's output gradient, which the in-place ReLU shares). The same results
     * as the two layers. NULL: it does not fuse. */
    int (*relu_forward)(const mw_layer_call *c, float M);
    void (*relu_backward)(const mw_layer_call *c, float M);
    /* A layer fused with the activation that reads its output (plan_fusion; forward only):
     * act_forward writes this layer's output c->y and the activation's, y (y == c->y: a ReLU in
     * place), the same values as the two layers' forwards, and returns 1; or returns 0 when the
     * table has no kernel for it (the two layers then run on their own). NULL: it does not
     * fuse. */
    int (*act_forward)(const mw_layer_call *c, float *y, mw_act_kind kind, float alpha);
    /* Bytes of its workspace buffer for n examples (argmax, dropout mask, batch statistics);
     * NULL: none. */
    size_t (*buf_bytes)(const struct mw_layer *l, size_t n);
    /* Floats of kernel scratch its kernels want for n examples (the workspace holds the most
     * any layer wants); NULL: none. */
    size_t (*scratch)(const struct mw_layer *l, size_t n);
    /* 1 when its output (backward 0) or its input's gradient (backward 1) holds 16-bit
     * values whenever its inputs (its output's gradient) do: it selects, copies or zeroes,
     * never computes a new value. NULL: never. */
    int (*stays_16bit)(const struct mw_layer *l, int backward);
    int matmul; /* Conv2D, Dense: weights rounded to 16 bits under a mixed policy; an
                   activation folded after it belongs to it (summary, diff) */
    int ids;    /* Embedding: its input is token ids (integers, as Keras' int32 tensor): never
                   rounded to 16 bits, and read whatever the policy of the layer that makes it */
    int tied16; /* ReversibleEmbedding's reverse call: the weights it reads, its forward call's
                   layer's (tied - 1), rounded to 16 bits under its mixed policy, as Keras
                   casts the variables at use */
    /* 1 when the kernel table t has every entry it calls; MW_EUNSUPPORTED with the reason
     * (other than "not implemented") as -1. NULL: it needs none beyond acc and zero. */
    int (*has_kernels)(const struct mw_layer *l, const mw_kernels *t);
    /* The first difference of x and y (same kind, same input shape) past their shapes, as
     * mw_layer_diff writes it; 0: none. NULL: nothing else to compare. */
    int (*differs)(char *d, size_t len, const struct mw_layer *x, const struct mw_layer *y);
    /* Layer i of m written back as Keras 3 does (a .keras export of a model whose own text
     * Keras 3 cannot read): its keys added to config, which holds name, trainable and dtype;
     * returns its Keras class. NULL (or returning NULL): this writer cannot. */
    const char *(*to_keras)(const struct mw_model *m, int i, json_t *config);
    /* How l treats a padding mask that reaches it (masks.h; mw_mask_pass, mw_mask_drop for
     * the rows whose rule does not depend on the layer). NULL: it refuses one. */
    mw_mask_rule (*mask)(const struct mw_layer *l);
    /* Draws l's weights in params from r when they are several tensors, each with its own
     * fans (weights.h: mw_weights_init_tensor); NULL: the kernel (fan_in, fan_out), the bias
     * and BatchNormalization's moving statistics, as weights.c does for every other layer. */
    void (*init)(const struct mw_layer *l, float *params, mw_rng *r);
    /* Appends l's Keras variables (kvars.h: mw_kvar_add) in the order Keras' build() creates
     * them, skipping the ones the config turns off. NULL: it has none (a row whose layers have
     * parameters must list them; the Keras files refuse a layer it does not). */
    void (*keras_vars)(const struct mw_layer *l, mw_keras_var *v, int *nv);
    /* The sublayer groups Keras writes in l's group of .weights.h5 (NULL-terminated, with or
     * without variables: MultiHeadAttention's query_dense, ..., _softmax); NULL: none. */
    const char *const *(*keras_subs)(const struct mw_layer *l);
} mw_layer_ops;

/* The row of an mw_layer_kind; NULL for none (MW_LAYER_KINDS). */
const mw_layer_ops *mw_layer_row(int kind);
/* The row that reads Keras class cls, NULL when none does. */
const mw_layer_ops *mw_layer_row_keras(const char *cls);
/* The same for cls from module (a .keras entry's "module", NULL when it has none), where rows
 * share a class name (Keras' RMSNormalization, Gemma's): the row of that module, else the one of
 * Keras' built-in layers (module NULL), else the first row reading cls (whose module the reader
 * then refuses). */
const mw_layer_ops *mw_layer_row_keras_in(const char *cls, const char *module);
/* The modules the rows read cls from, quoted and ", "-separated into buf ("keras.layers" for
 * Keras' built-in one); returns how many rows read it from a module of their own (0: cls is
 * only Keras' built-in class, or no row's). */
int mw_layer_keras_modules(const char *cls, char *buf, size_t len);
/* Every row, the readers without a kind of their own too, in layer_list.h's order: row i, NULL
 * past the last. */
const mw_layer_ops *mw_layer_row_nth(int i);
/* The Keras class of a row's keras[] entry: without its MW_LAYER_KERAS_HUB prefix. */
const char *mw_layer_keras_class(const char *entry);
/* 1 when the class a row reads as cls is KerasHub's (keras[] has it with MW_LAYER_KERAS_HUB). */
int mw_layer_keras_hub(const char *cls);
/* Every Keras class the rows read, and KerasHub's alone, ", "-separated, for messages
 * (static). */
const char *mw_layer_keras_list(void);
const char *mw_layer_keras_hub_list(void);

#endif
