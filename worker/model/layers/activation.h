/* The activations as layers (ReLU, Activation, Softmax, the functions of activations.h): the
 * builders of the activation family (layers/activation.c). A layer with an activation= argument
 * (Conv2D, Dense) adds its folded activation with mw_model_add_act. */
#ifndef MW_WORKER_MODEL_LAYERS_ACTIVATION_H
#define MW_WORKER_MODEL_LAYERS_ACTIVATION_H

#include <stddef.h>

#include "worker/model/activations.h"
#include "worker/model/model.h"

/* folded = 1: the activation of the previous layer (Conv2D(..., activation='relu')). */
mw_status mw_model_add_relu(mw_model *m, const char *name, int folded);
/* Keras' ReLU(max_value, negative_slope, threshold) beyond the plain one: max_value >= 0
 * (INFINITY: none), negative_slope >= 0, threshold >= 0 (kernels: relux_fwd). */
mw_status mw_model_add_relux(mw_model *m, const char *name, float max_value, float slope,
                             float threshold);
/* A Keras Activation layer: relu, linear (the identity) or softmax. */
mw_status mw_model_add_activation(mw_model *m, const char *name, mw_activation act);
/* The final softmax: folded = 1 for the previous layer's activation='softmax'
 * (hidden in the summary), 0 for a Keras Softmax layer. Computes nothing: the
 * cross-entropy applies it. Finalize fails unless it is the last layer. */
mw_status mw_model_add_softmax(mw_model *m, const char *name, int folded);
/* Any activation as a layer (an Activation layer, or folded = 1: the previous layer's
 * activation=...); relu, linear and softmax go to the layers above. alpha: elu's alpha or
 * leaky_relu's negative slope. */
mw_status mw_model_add_act(mw_model *m, const char *name, mw_activation act, float alpha,
                           int folded);

#endif
