/* The loss table: one row per loss, stating once what the model and the formats need of it:
 * the per-example losses (and the probabilities the metrics read) from the model's output,
 * their gradient, the accuracy's rule, and how Keras names it. The model holds the kind of
 * its loss (mw_model.loss); model.c reaches the loss only through its row.
 *
 * Today's one row is sparse softmax cross-entropy from logits (Keras'
 * SparseCategoricalCrossentropy, the final softmax folded in); the losses of binary,
 * multi-label and regression tasks are rows to come. A new loss is its kind here, its row in
 * loss.c, and its kernel entries. */
#ifndef MW_WORKER_MODEL_LOSS_H
#define MW_WORKER_MODEL_LOSS_H

#include <stdint.h>

#include "kernels/kernels.h"

typedef enum {
    MW_LOSS_SPARSE_XENT, /* sparse softmax cross-entropy from logits */
    MW_LOSS_KINDS
} mw_loss_kind;

typedef struct {
    const char *keras;      /* Keras' class ("SparseCategoricalCrossentropy") */
    const char *keras_name; /* its config's name ("sparse_categorical_crossentropy") */
    /* loss[n] and prob[n x width] from the output out[n x width] and the labels */
    void (*forward)(const mw_kernels *kt, const mw_kctx *k, float *loss, float *prob,
                    const float *out, const int32_t *labels, int n, int width);
    /* dout = scale * d(loss) / d(out), from forward's prob */
    void (*backward)(const mw_kernels *kt, const mw_kctx *k, float *dout, const float *prob,
                     const int32_t *labels, float scale, int n, int width);
    /* How many of n examples count as correct, from host copies of prob and labels. */
    int (*correct)(const float *prob, const int32_t *labels, int n, int width);
} mw_loss_ops;

/* The row of a kind (< MW_LOSS_KINDS). */
const mw_loss_ops *mw_loss_row(mw_loss_kind kind);

#endif
