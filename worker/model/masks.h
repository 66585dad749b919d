/* Keras' padding mask (Embedding(mask_zero=True), TokenAndPositionEmbedding(mask_zero=True))
 * through the model, as Keras 3.15 propagates it in its graph and at run time: a model-wide
 * pass over the layers, each treating the mask as its row's mask rule says (layer.h:
 * mw_layer_ops.mask, mw_mask_rule). */
#ifndef MW_WORKER_MODEL_MASKS_H
#define MW_WORKER_MODEL_MASKS_H

#include "common/status.h"
#include "worker/model/layer.h"

struct mw_model;

/* The rule of the rows whose rule does not depend on the layer. */
mw_mask_rule mw_mask_pass(const struct mw_layer *l);
mw_mask_rule mw_mask_drop(const struct mw_layer *l);

/* Plans the padding mask through m: every layer's masked says which inputs carry it, and
 * loss.masked whether the output does (Keras masks the loss and the metrics with it). A mask
 * reaching a layer whose rule is MW_MASK_REFUSE is refused (MW_EUNSUPPORTED naming the layer);
 * MW_ENOMEM. Called by mw_model_finalize (and by the Keras reader, for its messages). */
mw_status mw_masks_plan(struct mw_model *m);

#endif
