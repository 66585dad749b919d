/* The model: a sequential stack of layers over one flat parameter arena.
 *
 * Building is two-phase: add layers (shapes are checked here, once, so kernels
 * never have to), then mw_model_finalize allocates the parameter arena with a
 * view per tensor. Gradients and optimizer slots are separate arenas of the
 * same layout (worker/train). Activations live in a mw_model_ws sized for a
 * maximum batch, one per replica.
 *
 * Shapes are per example, Keras' channels_last: (H, W, C); Dense and Flatten
 * outputs are (1, 1, units). */
#ifndef MW_WORKER_MODEL_H
#define MW_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/arena.h"
#include "common/status.h"
#include "kernels/kernels.h"

typedef enum {
    MW_LAYER_CONV2D,
    MW_LAYER_MAXPOOL,
    MW_LAYER_FLATTEN,
    MW_LAYER_DENSE,
    MW_LAYER_RELU,
} mw_layer_kind;

typedef enum {
    MW_INIT_ZEROS,
    MW_INIT_ONES,
    MW_INIT_GLOROT_UNIFORM,
    MW_INIT_GLOROT_NORMAL,
    MW_INIT_HE_UNIFORM,
    MW_INIT_HE_NORMAL,
} mw_init_kind;

typedef struct {
    mw_layer_kind kind;
    char name[64];        /* Keras-style: conv2d, conv2d_1, dense, ... */
    int in_h, in_w, in_c; /* per-example input shape */
    int out_h, out_w, out_c;
    mw_conv2d_geom conv;
    mw_pool_geom pool;
    /* parameters (conv2d, dense): offsets into the arenas, counts */
    size_t w_off, w_count, b_off, b_count;
    int has_bias;
    int fan_in, fan_out;
    mw_init_kind kernel_init, bias_init;
    int in_place; /* output aliases input (relu, flatten) */
    int folded;   /* a Keras layer's `activation`, shown with that layer */
} mw_layer;

typedef struct {
    mw_layer *layers; /* owned */
    int nlayers, cap;
    int in_h, in_w, in_c;
    int nclasses;   /* width of the last layer */
    mw_arena params; /* allocated by finalize */
    size_t nparams;  /* real parameters (without padding) */
    int finalized;
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
mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias);
/* folded = 1: the activation of the previous layer (Conv2D(..., activation='relu')). */
mw_status mw_model_add_relu(mw_model *m, const char *name, int folded);
/* Allocate the parameter arena; padded to a multiple of pad_multiple floats so
 * collectives can cut it into equal shards. */
mw_status mw_model_finalize(mw_model *m, size_t pad_multiple);
/* Keras' initializers from the seed (each layer its own stream, so adding a
 * layer does not change the others' values). */
void mw_model_init_params(mw_model *m, uint64_t seed);

/* The tutorial CNN (DESIGN.md) for (h, w, c) inputs and nclasses outputs. */
mw_status mw_model_build_tutorial(mw_model *m, int h, int w, int c, int nclasses);

/* Per-replica activation workspace for batches of up to max_n examples. */
typedef struct {
    int max_n;
    float **act;      /* nlayers + 1 views: act[0] input, act[i+1] output of layer i */
    float **grad;     /* same shapes; grad[0] unused */
    int32_t **argmax; /* per maxpool layer, else NULL */
    float *prob;      /* (max_n, nclasses) softmax */
    float *loss;      /* (max_n) per-example losses */
    int32_t *labels;  /* (max_n) */
    float *scratch;   /* kernel workspace */
    size_t scratch_count;
    void *block; /* the single owned allocation behind act/grad/... */
} mw_model_ws;

void mw_model_ws_init(mw_model_ws *ws);
mw_status mw_model_ws_alloc(mw_model_ws *ws, const mw_model *m, int max_n);
void mw_model_ws_free(mw_model_ws *ws);

/* Forward for n examples already in ws->act[0] (and labels in ws->labels):
 * fills logits, prob and per-example losses. */
void mw_model_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                      mw_model_ws *ws, int n);
/* Backward from the losses scaled by `scale` (1 / global batch): ACCUMULATES
 * into the gradient arena grads (same layout as params). */
void mw_model_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                       mw_model_ws *ws, float *grads, int n, float scale);
/* After a forward: how many of the n examples have argmax(prob) == label. */
int mw_model_correct(const mw_model *m, const mw_model_ws *ws, int n);

/* Print a Keras-like summary table (layer, output shape, params, total). */
void mw_model_summary(const mw_model *m, FILE *f);

#endif
