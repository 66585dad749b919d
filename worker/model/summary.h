/* The model's Keras-like summary table (summary.c). */
#ifndef MW_WORKER_MODEL_SUMMARY_H
#define MW_WORKER_MODEL_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "worker/model/model.h"

/* Print a Keras-like summary table (layer (class), output shape, params, total):
 * a layer's folded activation is part of its row; Dropout, Activation, ReLU
 * and Softmax layers get their own rows with 0 parameters. */
void mw_model_summary(const mw_model *m, FILE *f);

#endif
