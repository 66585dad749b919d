/* KerasHub's RotaryEmbedding as a model layer: the builder of the rope family
 * (layers/rope.c). */
#ifndef MW_WORKER_MODEL_LAYERS_ROPE_H
#define MW_WORKER_MODEL_LAYERS_ROPE_H

#include "worker/model/model.h"

/* RotaryEmbedding(max_wavelength, scaling_factor, denominator_dim) on a sequence (None, T, D),
 * D even, applied to all D features as one group (rope_type "linear", start_index 0);
 * denominator_dim 0: D. max_wavelength, scaling_factor and denominator_dim > 0. */
mw_status mw_model_add_rope(mw_model *m, const char *name, float max_wavelength, float scale,
                            int denom);

#endif
