/* Conv2DTranspose and UpSampling2D: the builders of the upsample family (layers/upsample.c), the
 * layers a segmentation model's decoder makes its images larger with. */
#ifndef MW_WORKER_MODEL_LAYERS_UPSAMPLE_H
#define MW_WORKER_MODEL_LAYERS_UPSAMPLE_H

#include "worker/model/model.h"

/* Conv2DTranspose(filters, (kh, kw), (sh, sw), padding same or valid, output_padding (oph, opw),
 * -1 for None, use_bias) on the current output, Keras 3's output size; MW_EMODEL with a message
 * naming the layer when it does not fit. A NULL name gets Keras' automatic one. */
mw_status mw_model_add_conv2d_tr(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                                 int sw, int same, int oph, int opw, int use_bias);

/* UpSampling2D(size (sh, sw), interpolation bilinear 1 or nearest 0) on the current output. */
mw_status mw_model_add_upsample(mw_model *m, const char *name, int sh, int sw, int bilinear);

#endif
