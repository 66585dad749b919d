/* Keras 3's weights file, `.weights.h5` (also `model.weights.h5` inside a .keras archive),
 * read and written through libhdf5. The layout, as keras/src/saving/saving_lib.py writes it
 * (docs/formats.md has it in full):
 *
 *   /layers/<layer name>/vars/<i>   float32 dataset: variable i of the layer, Keras order and
 *                                   shape (worker/keras/keras_vars.h); group attribute name=<layer>
 *   /optimizer/vars/<i>             the optimizer's iterations (int32), learning rate
 *                                   (float32) and slots (mw_keras_optimizer below)
 *   /vars                           the model's own (none); attribute name=<model name>
 *
 * Files from Keras 2.13 name the top group `_layer_checkpoint_dependencies`; both are read.
 * HDF5's own error printing is switched off: every problem is one mw_err naming the origin,
 * the layer and the variable.
 *
 * A weights file must hold its weights itself (it comes inside a .keras from anywhere): every
 * link the reader follows is a hard link (soft, external and user-defined links are refused),
 * every dataset it reads is compact, contiguous or chunked in the file, with no external raw
 * storage, not virtual, and filtered by nothing but shuffle and fletcher32 (a chunk at most
 * the dataset and 1 MiB); HDF5 filter plugins are never loaded. Each refusal is MW_EDATA
 * (exit 3) naming the object and what it would reach, decided before HDF5 opens anything it
 * names. The image is used in place: no copy of it is made. */
#ifndef MW_WORKER_KERAS_H5_H
#define MW_WORKER_KERAS_H5_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model/model.h"

/* Fill params (m's arena layout) from the HDF5 file image image[0..nbytes) (borrowed, not
 * copied, not written). Every layer of m with variables must have exactly its variables there,
 * float32, in their Keras shapes, stored as above; the file may have no weights for a layer m
 * does not have. origin names the file in messages ("m.keras: model.weights.h5"). MW_EDATA
 * for any mismatch, a link or storage that leads outside the file, or a corrupt or truncated
 * file; params is then partly written. */
mw_status mw_keras_h5_read(const mw_model *m, float *params, const void *image, size_t nbytes,
                           const char *origin);

/* The optimizer written with the weights, in Keras' /optimizer/vars: 0 iterations (int32),
 * 1 learning_rate (float32), then per trainable variable in model order its slots: Adam
 * momentum and velocity (slot1, slot2), SGD momentum (slot1). Without slots (slot1 NULL),
 * only the first two, as Keras saves a model not trained yet. */
typedef struct {
    const char *name;             /* "adam" or "sgd" */
    double learning_rate;         /* as compile_config and the variable record it */
    double momentum;              /* SGD */
    double beta1, beta2, epsilon; /* Adam */
    long iterations;              /* updates done */
    const float *slot1;           /* m's arena layout, or NULL */
    const float *slot2;           /* Adam only */
} mw_keras_optimizer;

/* A new HDF5 file image of m's weights from params, *image malloc'ed (the caller frees it),
 * *nbytes its size, with opt's state in /optimizer. */
mw_status mw_keras_h5_write(const mw_model *m, const float *params, const mw_keras_optimizer *opt,
                            void **image, size_t *nbytes, const char *origin);

#endif
