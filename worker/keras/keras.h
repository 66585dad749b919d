/* Models from Keras JSON: build an mw_model from what `model.to_json()` wrote (or the
 * config.json of a .keras archive, worker/keras/keras_archive.h).
 *
 * Accepted shapes of the text:
 *   Keras 2 / tf.keras  {"class_name": "Sequential", "config": {"name": ..., "layers": [...]}}
 *                       (older files: "config" is the layer list itself); the input shape is
 *                       an InputLayer's batch_input_shape or the first layer's
 *   Keras 3             the same with "module", "registered_name", "build_config",
 *                       "batch_shape" and dtype policies as objects; and Functional models
 *                       ("Functional" or "Model": layers with inbound_nodes, one input and one
 *                       output, a graph in which a layer reads earlier layers' outputs)
 *   TensorFlow.js       {"modelTopology": {"model_config": <one of the above>}, ...} or
 *                       {"modelTopology": <one of the above>}
 *
 * Layers: InputLayer, the classes of the layer table (worker/model/layer.h: each row reads its
 * own config, with worker/model/kread.h's typed readers; KerasHub's classes with their
 * registered names) and the Keras preprocessing layers (worker/data/preprocess.h); a final
 * softmax is folded into the cross-entropy (the model's output stays logits, so the loss is
 * computed stably);
 * the initializers GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal,
 * LecunUniform, VarianceScaling, RandomUniform, RandomNormal, TruncatedNormal, Zeros, Ones and
 * Constant with their config values (their `seed` is ignored: mwtrain seeds from --seed); the
 * regularizers L2, L1 and L1L2. Dtypes: float32, mixed_bfloat16 and mixed_float16 policies
 * (an integer InputLayer dtype for token ids). Anything else (a layer class, an activation, an
 * activity regularizer, a constraint, channels_first, dilation, groups, another dtype, frozen
 * layers) fails with one message naming the layer, the field and what is supported:
 *
 *   model.json: layer 'conv2d' (Conv2D): data_format "channels_first" is not supported;
 *   supported: "channels_last"
 *
 * Shapes: the model's input must be the data's (in_h, in_w, in_c), given as
 * (None, H, W, C), (None, H, W) when C is 1, a sequence (None, T, C), flat (None, H*W*C), or
 * token ids (None, T) for an Embedding; its output must be (None, nclasses), or
 * (None, T, nclasses) with a loss per position. Both are checked here, before any training. */
#ifndef MW_WORKER_KERAS_H
#define MW_WORKER_KERAS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model/model.h"

/* Largest model JSON accepted, in bytes. */
#define MW_KERAS_MAX_BYTES (4u << 20)

/* Build m (mw_model_init is done here; m need not be initialized) from the Keras JSON in
 * json_text[0..nbytes) (no terminator needed). origin names the text in messages (a path).
 * in_h, in_w, in_c: the data's image shape; all 0 takes the shape from the file (summary
 * without data). nclasses: the data's classes, or 0 to skip that check. The model is not
 * finalized. m keeps a copy of the text in m->source (for checkpoints). Errors: MW_EMODEL for
 * malformed JSON or configs and shape mismatches, MW_EUNSUPPORTED for valid Keras this
 * program does not implement; m is then left empty (mw_model_free is safe either way). */
mw_status mw_keras_load(mw_model *m, const char *json_text, size_t nbytes, const char *origin,
                        int in_h, int in_w, int in_c, int nclasses);
/* The same from a file (MW_EIO when it cannot be read); messages name the path. */
mw_status mw_keras_load_file(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                             int nclasses);
/* mw_keras_load and mw_keras_load_file for data of several named inputs (parts, with
 * in_h = in_w = 1 and in_c their total width; NULL or n 0: one input): each InputLayer of a
 * Functional model takes the part of its name (worker/model/inputs.h). */
mw_status mw_keras_load_parts(mw_model *m, const char *json_text, size_t nbytes, const char *origin,
                              int in_h, int in_w, int in_c, int nclasses,
                              const mw_input_parts *parts);
mw_status mw_keras_load_file_parts(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                   int nclasses, const mw_input_parts *parts);

/* The built-in tutorial CNN, worker/models/tutorial_cnn.json, embedded at build time
 * (NUL-terminated; nbytes without the terminator). */
extern const char mw_keras_tutorial_json[];
extern const size_t mw_keras_tutorial_json_nbytes;

/* The tutorial CNN (docs/design.md): mw_keras_load of the built-in tutorial_cnn.json, written
 * for 28x28x1 inputs and 10 classes; other shapes fail with the loader's message. */
mw_status mw_keras_build_tutorial(mw_model *m, int h, int w, int c, int nclasses);

#endif
