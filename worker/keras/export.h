/* Export trained weights as safetensors, the format PyTorch, NumPy and JAX
 * users load without TensorFlow (https://github.com/huggingface/safetensors), or as Keras'
 * own .keras archive or .weights.h5 (mw_export_file).
 *
 * File: uint64 N (little-endian) | N bytes of JSON header, padded with spaces
 * to a multiple of 8 | the tensors' raw little-endian float32 data back to back
 * in model order. The header maps each tensor name to
 * {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} (byte offsets into
 * the data that follows the header) and carries
 * "__metadata__":{"format":"mwtrain"}. Names and layouts are Keras':
 *   <layer>/kernel   Conv2D [KH, KW, Cin, Cout], Dense [in, out]
 *   <layer>/bias     [units]
 * with Keras layer names (conv2d, conv2d_1, dense, dense_1). docs/formats.md
 * has the full description and a NumPy reader. */
#ifndef MW_WORKER_EXPORT_H
#define MW_WORKER_EXPORT_H

#include "common/status.h"
#include "worker/keras/keras_h5.h"
#include "worker/model/model.h"

/* Write m's parameters, taken from params (the layout of m's arena: the
 * model's own m->params.data or a restored copy; borrowed), to path. The
 * write is atomic: a temp file in the same directory, fsync, rename, fsync of
 * the directory; on failure path is untouched. MW_EIO naming the path and the
 * reason; MW_EINVAL when path exists and is not a regular file (a FIFO, a
 * device node, a socket, a directory or a dangling link: never replaced). */
mw_status mw_export_safetensors(const mw_model *m, const float *params, const char *path);

/* `mwtrain export --format`: "safetensors" (above), "keras" (a .keras archive that
 * keras.models.load_model opens, worker/keras/keras_archive.h) or "weights-h5" (the .weights.h5
 * that model.load_weights reads, worker/keras/keras_h5.h); opt (the optimizer, its hyperparameters
 * and, when it has them, its slots) goes into the archive's compile_config and the weights'
 * /optimizer group. Atomic as above. */
mw_status mw_export_file(const mw_model *m, const float *params, const char *format,
                         const mw_keras_optimizer *opt, const char *path);

#endif
