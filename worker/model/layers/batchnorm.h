/* BatchNormalization: its builder, and what the replica backends call around it (the moving
 * statistics' update, the synchronized variant's sums) (layers/batchnorm.c). */
#ifndef MW_WORKER_MODEL_LAYERS_BATCHNORM_H
#define MW_WORKER_MODEL_LAYERS_BATCHNORM_H

#include <stddef.h>

#include "worker/model/model.h"

/* Keras BatchNormalization(axis=-1, momentum, epsilon, center, scale, synchronized). */
mw_status mw_model_add_batchnorm(mw_model *m, const char *name, float momentum, float epsilon,
                                 int center, int scale, int sync);
/* 1 when the model has a BatchNormalization layer (its training forward needs the whole
 * replica slice in one call). */
int mw_model_has_batchnorm(const mw_model *m);
/* After the all-reduce, before the optimizer: fold the summed batch statistics in grads
 * into the moving statistics in params and zero those gradient slots (arena layout, in kt's
 * memory: device arrays on the GPU, enqueued on k's stream behind the all-reduce). Nothing
 * without BatchNormalization. */
void mw_model_update_stats(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, float *params,
                           float *grads);
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

#endif
