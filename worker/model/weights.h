/* The weights' settings (weights.c): Keras' initializers and the regularizers' penalty and
 * gradient. */
#ifndef MW_WORKER_MODEL_WEIGHTS_H
#define MW_WORKER_MODEL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "worker/model/model.h"

/* count floats at p drawn from initializer in, with the fans Keras computes for the tensor's
 * shape; a row's init (layer.h) calls it for each of its tensors. */
void mw_weights_init_tensor(float *p, size_t count, const mw_init *in, int fan_in, int fan_out,
                            mw_rng *r);
/* Keras' initializers from the seed (each layer its own stream, so adding a
 * layer does not change the others' values). Fans as Keras computes them:
 * Conv2D kernel fan_in = KH*KW*C, fan_out = KH*KW*O; Dense (I, O); a bias of
 * n values has fan_in = fan_out = n. */
void mw_model_init_params(mw_model *m, uint64_t seed);
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
/* The same for layers [from, to) only (the overlapped all-reduce's buckets). */
int mw_model_regularize_part(const mw_model *m, const mw_kernels *t, const mw_kctx *k,
                             const float *params, float *grads, double *acc, float scale, int from,
                             int to);
/* 1 when some layer has a kernel or bias regularizer. */
int mw_model_has_regularizers(const mw_model *m);
/* The kernel (bias 0) or bias (bias 1) regularizer of l; NULL: none. */
const struct mw_regularizer *mw_layer_regularizer(const struct mw_layer *l, int bias);

#endif
