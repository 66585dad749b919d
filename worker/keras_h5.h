/* Keras 3's weights file, `.weights.h5` (also `model.weights.h5` inside a .keras archive),
 * read and written through libhdf5. The layout, as keras/src/saving/saving_lib.py writes it
 * (docs/formats.md has it in full):
 *
 *   /layers/<layer name>/vars/<i>   float32 dataset: variable i of the layer, Keras order and
 *                                   shape (worker/keras_vars.h); group attribute name=<layer>
 *   /optimizer/vars/{0,1}           the optimizer's iterations (int32) and learning rate
 *                                   (float32), as for a compiled model not yet trained
 *   /vars                           the model's own (none); attribute name=<model name>
 *
 * Files from Keras 2.13 name the top group `_layer_checkpoint_dependencies`; both are read.
 * HDF5's own error printing is switched off: every problem is one mw_err naming the origin,
 * the layer and the variable. */
#ifndef MW_WORKER_KERAS_H5_H
#define MW_WORKER_KERAS_H5_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model.h"

/* Fill params (m's arena layout) from the HDF5 file image image[0..nbytes) (borrowed). Every
 * layer of m with variables must have exactly its variables there, float32, in their Keras
 * shapes; the file may have no weights for a layer m does not have. origin names the file in
 * messages ("m.keras: model.weights.h5"). MW_EDATA for any mismatch or a corrupt or truncated
 * file; params is then partly written. */
mw_status mw_keras_h5_read(const mw_model *m, float *params, const void *image, size_t nbytes,
                           const char *origin);

/* A new HDF5 file image of m's weights from params, *image malloc'ed (the caller frees it),
 * *nbytes its size. optimizer ("adam", "sgd") and learning_rate go in /optimizer. */
mw_status mw_keras_h5_write(const mw_model *m, const float *params, const char *optimizer,
                            double learning_rate, void **image, size_t *nbytes, const char *origin);

#endif
