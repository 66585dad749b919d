/* The layer table: what a layer family is to the model, stated once.
 *
 * Each family (worker/model/layers/, one file each) defines one row, an mw_layer_ops, for each
 * mw_layer_kind it implements; layers.c lists the rows, and the model (model.c, diff.c) reaches a
 * layer only through its row: forward and backward through the kernel table, the workspace buffer
 * it keeps between them, whether it keeps 16-bit values exact (so mixed precision rounds only where
 * needed), the kernel entries it needs, how two instances differ, and the Keras classes it reads. A
 * family's file also holds its mw_model_add_* builders (model.h): they check the new layer against
 * its input shape and set its output shape and parameter counts.
 *
 * A new layer that reuses existing kernels is its file, its row in layers.c, its kind in
 * model.h and, with weights, its variables in worker/keras/keras_vars.c. */
#ifndef MW_WORKER_MODEL_LAYER_H
#define MW_WORKER_MODEL_LAYER_H

#include <stddef.h>

#include <jansson.h>

#include "common/status.h"
#include "kernels/kernels.h"

/* The model's types (model.h). The table names them only by their tags, so that model.c reaches
 * the layers through it while the layers' files use the model's types: no include circle. */
struct mw_model;
struct mw_layer;
struct mw_model_ws;
struct mw_regularizer;

/* One layer's forward or backward: what the model hands the row. */
typedef struct {
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
    void *buf;                    /* its workspace buffer (buf_bytes), else NULL */
    size_t cnt, rows;             /* n * output values per example; n * out_h * out_w */
} mw_layer_call;

/* The Keras model reader's state for one layer (worker/keras/keras_layer.h). */
typedef struct mw_kread mw_kread;

/* Keras class names a row reads, at most (the last entry of a full list is NULL). */
#define MW_LAYER_KERAS_MAX 8

typedef struct {
    /* The Keras class names it reads (NULL-terminated); none for the kinds the model makes
     * itself (a computed softmax). */
    const char *keras[MW_LAYER_KERAS_MAX];
    /* Keras config -> mw_model_add_*: R names the layer for messages and holds the model. */
    mw_status (*parse)(mw_kread *R, const char *cls, const json_t *cfg, const char *name);
    void (*forward)(const mw_layer_call *c);
    /* Accumulates into dx (every input's gradient) and the weights' gradients in G; a layer in
     * place (l->in_place) overwrites dy, which is dx. */
    void (*backward)(const mw_layer_call *c);
    /* Bytes of its workspace buffer for n examples (argmax, dropout mask, batch statistics);
     * NULL: none. */
    size_t (*buf_bytes)(const struct mw_layer *l, size_t n);
    /* Floats of kernel scratch its kernels want for n examples (the workspace holds the most
     * any layer wants); NULL: none. */
    size_t (*scratch)(const struct mw_layer *l, size_t n);
    /* 1 when its output (backward 0) or its input's gradient (backward 1) holds 16-bit
     * values whenever its inputs (its output's gradient) do: it selects, copies or zeroes,
     * never computes a new value. NULL: never. */
    int (*exact)(const struct mw_layer *l, int backward);
    int matmul; /* Conv2D, Dense: weights rounded to 16 bits under a mixed policy; an
                   activation folded after it belongs to it (summary, diff) */
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
} mw_layer_ops;

/* The row of an mw_layer_kind; NULL for none (MW_LAYER_KINDS). */
const mw_layer_ops *mw_layer_row(int kind);
/* The row that reads Keras class cls, NULL when none does. */
const mw_layer_ops *mw_layer_row_keras(const char *cls);
/* Every Keras class the rows read, ", "-separated, for messages (static). */
const char *mw_layer_keras_list(void);

/* ---- what model.c gives the rows ---- */

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
/* The Keras layer behind output idx, for messages: a folded activation's own layer. */
const char *mw_model_producer_name(const struct mw_model *m, int idx);
/* y = 0, and y = x, through the table (device memory on a GPU). */
void mw_layer_zero(const mw_kernels *kt, const mw_kctx *k, void *p, size_t nbytes);
void mw_layer_copy(const mw_kernels *kt, const mw_kctx *k, float *y, const float *x, size_t count);
/* x rounded in place to the 16 bits of mw_policy policy (kernels/cast.h). */
void mw_layer_round(const mw_kernels *kt, const mw_kctx *k, int policy, float *x, size_t count);
/* The kernel (bias 0) or bias (bias 1) regularizer of l; NULL: none. */
const struct mw_regularizer *mw_layer_regularizer(const struct mw_layer *l, int bias);
/* A row's exact for a layer that selects, copies or zeroes: 16-bit values stay 16-bit both
 * ways. */
int mw_layer_exact_always(const struct mw_layer *l, int backward);
/* A layer that computes nothing (Flatten, an identity, Dropout at inference): y = x unless in
 * place; and its backward, dx += dy unless in place. */
void mw_layer_pass_fwd(const mw_layer_call *c);
void mw_layer_pass_bwd(const mw_layer_call *c);
/* The buffer an elementwise backward writes: dx itself in place (dy is dx), else dy (no longer
 * needed: every consumer of the output has run); mw_layer_pass_bwd then adds it into dx. */
float *mw_layer_bwd_out(const mw_layer_call *c);

/* ---- what the rows' differs use (diff.c) ---- */

/* "<what> <x> in the checkpoint, <y> in --model" into d; returns 1. */
int mw_diff_text(char *d, size_t n, const char *what, const char *x, const char *y);
/* k sizes shown as AxBxC; 0 when equal. */
int mw_diff_dims(char *d, size_t n, const char *what, const int *x, const int *y, int k);
/* Two reals, with as many digits as tell them apart; 0 when equal. */
int mw_diff_real(char *d, size_t n, const char *what, double x, double y);
/* Padding by its effect, px and py the zero rows and columns before the input and the output
 * size (top, left, height, width): shown as same / valid; 0 when equal. */
int mw_diff_padding(char *d, size_t n, int same_x, int same_y, const int *px, const int *py);
/* Two flags as true / false; 0 when equal. */
int mw_diff_flag(char *d, size_t n, const char *what, int x, int y);

#endif
