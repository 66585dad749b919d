/* Whether two models compute the same function (diff.c), and the helpers the rows' differs
 * (layer.h) write their differences with. */
#ifndef MW_WORKER_MODEL_DIFF_H
#define MW_WORKER_MODEL_DIFF_H

#include <stddef.h>

#include "worker/model/model.h"

/* Whether a and b compute the same function given the same weights: 0 when they do, else 1
 * with `what` (len bytes, may be NULL when len is 0) naming the FIRST difference for a user,
 * a being described as the checkpoint's model and b as --model's:
 *
 *   layer 3 (dense_1): activation relu in the checkpoint, linear in --model
 *   the checkpoint has 8 layers, --model 7; the first difference is layer 2 (...): ...
 *
 * Layers are counted as Keras and the summary count them (0-based; an activation='relu'
 * belongs to its Conv2D or Dense). Compared, per layer: what it computes (its Keras class,
 * with Activation('relu') = ReLU() and Activation('softmax') = Softmax()), its input and output
 * shapes, and what its row's differs compares (layer.h: each family's settings that change the
 * function, regularizers included as they change the loss). Not compared: layer and model
 * names, initializers (restored weights replace them). Either model may be finalized or not. */
int mw_model_diff(const mw_model *a, const mw_model *b, char *what, size_t len);
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
