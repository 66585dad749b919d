/* The Keras variables of each layer: ONE table that says, for every layer kind with
 * parameters, which variables Keras gives it, in which order, with which shapes, and where
 * each lives in mwtrain's parameter arena. Every file format that names weights the Keras
 * way reads it: the safetensors export (<layer>/<variable>), and the .weights.h5 inside a
 * .keras archive, where variable i of a layer is the dataset layers/<layer>/vars/<i>
 * (i = the variable's place in Keras' layer.weights). The arena layouts ARE Keras' layouts
 * (Conv2D kernel (KH, KW, Cin, Cout), Dense kernel (in, out), row-major), so a variable is
 * one contiguous run of floats. */
#ifndef MW_WORKER_KERAS_VARS_H
#define MW_WORKER_KERAS_VARS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model.h"

/* Most variables one layer has (BatchNormalization will have 4). */
#define MW_KERAS_MAX_VARS 4

typedef struct {
    const char *name; /* Keras' variable name: "kernel", "bias", ... (static) */
    size_t off;       /* first float in the parameter arena */
    size_t count;     /* floats: the product of shape */
    int rank;
    long long shape[4];
} mw_keras_var;

/* l's variables in Keras order into v (room for MW_KERAS_MAX_VARS), their number into *nv
 * (0 for a layer without weights). MW_EUNSUPPORTED when l has parameters of a kind the table
 * does not know, MW_EINTERNAL when the model's counts disagree with the shapes (a bug). */
mw_status mw_keras_layer_vars(const mw_layer *l, mw_keras_var *v, int *nv);

/* 1 when layer l is a layer of its own in Keras' model (not an activation folded into the
 * Conv2D or Dense before it, which Keras keeps inside that layer). */
int mw_keras_layer_is_own(const mw_layer *l);

#endif
