/* Keras loss and metric configs: the JSON of keras.losses.serialize(loss) (--loss-config, a
 * .keras archive's compile_config.loss), a loss's name (--loss, or a string in
 * compile_config), and compile_config.metrics, into an mw_loss (worker/model/loss.h); and the
 * way back, for export.
 *
 * Accepted: {"module": "keras.losses", "class_name": C, "config": {...}} (Keras 3),
 * {"class_name": C, "config": {...}} (Keras 2), or a name ("mse", "binary_crossentropy",
 * "BinaryCrossentropy"), C one of the loss table's classes. Config keys: name, dtype,
 * reduction ("sum_over_batch_size", Keras 2's "auto"), axis (-1), and the class's own
 * (from_logits, label_smoothing in [0, 1], ignore_class (null or a label >= 0), delta > 0, gamma >=
 * 0, alpha in [0, 1], apply_class_balancing). Anything else is an error naming the key. */
#ifndef MW_WORKER_KERAS_KERAS_LOSS_H
#define MW_WORKER_KERAS_KERAS_LOSS_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/loss.h"
#include "worker/model/model.h"

/* ls from j (its metric left as it was); where names the source in messages. MW_ECONFIG, or
 * MW_EUNSUPPORTED for a feature mwtrain lacks; ls unchanged on failure. */
mw_status mw_keras_loss_from_json(mw_loss *ls, const json_t *j, const char *where);
/* ls->metrics from a compile_config "metrics" list (names or serialized metrics), in its
 * order, at most MW_METRICS_MAX; null or [] leaves the loss's default. A metric mwtrain does
 * not compute, one that does not fit the loss (mae beside a sparse loss, auc beside a
 * regression), an AUC configured otherwise than Keras' default, or a metric listed twice is an
 * error naming its entry. */
mw_status mw_keras_metrics_from_json(mw_loss *ls, const json_t *metrics, const char *where);
/* compile_config's weighted_metrics (null or [] : none): the same list, weighted by the sample
 * weights (mw_loss.weighted_metrics); refused beside a list of metrics, and for AUC. */
mw_status mw_keras_weighted_metrics_from_json(mw_loss *ls, const json_t *wm, const char *where);
/* Keras 3's serialized form of ls (a new reference; NULL when out of memory). */
json_t *mw_keras_loss_to_json(const mw_loss *ls);
/* ["<metric>", ...], Keras' names of ls's metrics beside an output of width units
 * ("accuracy" where Keras' rule for it gives that metric). */
json_t *mw_keras_metrics_to_json(const mw_loss *ls, int width);

/* The loss travels with the model: m->source (the Keras JSON the model was built from, which
 * every checkpoint holds) gets a top-level compile_config with m->loss's "loss" and "metrics"
 * (the other keys of one it has are kept). Nothing without a source. MW_ENOMEM. */
mw_status mw_keras_source_set_loss(mw_model *m);
/* root (owned: released) written as m->source, compact, in its key order. MW_ENOMEM. */
mw_status mw_keras_source_replace(mw_model *m, json_t *root);
/* The loss a model text carries (its compile_config's loss and metrics) into *ls when it
 * has one: *found 1, else 0 and ls unchanged. where names the text in messages. */
mw_status mw_keras_source_loss(const char *text, mw_loss *ls, const char *where, int *found);

#endif
