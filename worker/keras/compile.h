/* A run's loss and metrics, resolved once its flags are parsed: --loss NAME or --loss-config
 * FILE (never both), else a .keras --model's compile_config (its loss and metrics), else
 * sparse softmax cross-entropy from logits with accuracy; --metrics over any of them. (The
 * optimizer is resolved the same way by worker/keras/optimizer.h.) */
#ifndef MW_WORKER_KERAS_COMPILE_H
#define MW_WORKER_KERAS_COMPILE_H

#include "common/status.h"
#include "worker/opts.h"

/* Largest --loss-config file, as --optimizer-config's. */
#define MW_LOSS_MAX_BYTES (1u << 20)

/* o->loss and o->loss_from (which source, for messages; "" for the default). MW_EINVAL for
 * both flags, MW_ECONFIG / MW_EUNSUPPORTED for a config (worker/keras/keras_loss.h), MW_EIO
 * for a file that cannot be read. */
mw_status mw_loss_resolve(mw_train_opts *o);
/* --metrics "a,b" (Keras' names, in order) into o->loss's metrics, checked against its loss
 * (worker/keras/keras_loss.h); nothing without the flag. The session calls it once the loss
 * is final (after a checkpoint's is adopted: worker/session.c). */
mw_status mw_metrics_resolve(mw_train_opts *o);

#endif
