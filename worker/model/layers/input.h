/* A named input's InputLayer (layers/input.c): its builder. */
#ifndef MW_WORKER_MODEL_LAYERS_INPUT_H
#define MW_WORKER_MODEL_LAYERS_INPUT_H

#include "worker/model/model.h"

/* The InputLayer name of a model of several named inputs: it reads the model's input row and
 * outputs its part, the width values from off on, as a sequence of token ids (None, width). */
mw_status mw_model_add_input_part(mw_model *m, const char *name, int off, int width);

#endif
