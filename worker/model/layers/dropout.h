/* Dropout: the builder of the dropout family (layers/dropout.c). */
#ifndef MW_WORKER_MODEL_LAYERS_DROPOUT_H
#define MW_WORKER_MODEL_LAYERS_DROPOUT_H

#include <stddef.h>

#include "worker/model/model.h"

/* Keras Dropout(rate), 0 <= rate < 1: inverted dropout while the workspace
 * says training (see mw_model_ws), the identity otherwise. */
mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate);

/* Which values share one draw of Dropout's mask: each value its own (noise_shape null), every
 * value of an example one (noise_shape all 1: stochastic depth), or every position of an
 * (example, channel) one (noise_shape (None, 1, 1, C): SpatialDropout2D, SpatialDropout1D). */
typedef enum { MW_NOISE_VALUE, MW_NOISE_EXAMPLE, MW_NOISE_CHANNEL } mw_dropout_noise;

/* Dropout(rate, noise_shape) of class cls ("Dropout", "SpatialDropout1D", "SpatialDropout2D",
 * "StochasticDepth"; NULL: "Dropout"), the mask shared as noise says; rank: the noise_shape's axes
 * after the batch (for the export). */
mw_status mw_model_add_dropout_noise(mw_model *m, const char *name, float rate,
                                     mw_dropout_noise noise, int rank, const char *cls);

#endif
