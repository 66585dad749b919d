/* The model checked against the data it is to train on, before anything is allocated for
 * it: the loss against the targets (labels or float values, per example or per position,
 * ignore_class) and the output's width and activation; a token model's ids against its
 * Embedding's input_dim. Each message names the flag or file the mismatch came from, the
 * layer and the data's directory.
 *
 * The session (session.c) fills an mw_fit with its own model, data and options. */
#ifndef MW_WORKER_SESSION_CHECKS_H
#define MW_WORKER_SESSION_CHECKS_H

#include "common/status.h"
#include "worker/data/data.h"
#include "worker/model/model.h"
#include "worker/opts.h"

/* The model and the data it is to fit (all borrowed from the session). */
typedef struct {
    mw_model *model;
    mw_dataset *train, *test;
    const mw_train_opts *o;
    const int *shape; /* the data's h, w, c and classes the model was built for (0: none) */
} mw_fit;

/* rc of a model loader: an MW_EMODEL gets the data the model was checked against appended
 * ("(the data: DIR, 28x28x1 images, 10 classes)"); other codes are returned as they are. */
mw_status mw_fit_mismatch(const mw_fit *f, mw_status rc);
/* The loss (o->loss, set on the model) against the data's targets and the model's output;
 * integer labels become float targets for a loss that takes floats, and a sequence model's
 * vocabulary becomes the data's number of classes. */
mw_status mw_fit_check_loss(mw_fit *f);
/* A model that starts with an Embedding reads token ids: the data must hold integer ids
 * (N, T), each below its input_dim (the first one that is not names the example and the
 * position). */
mw_status mw_fit_check_tokens(mw_fit *f);

#endif
