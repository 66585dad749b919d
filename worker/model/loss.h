/* The loss table: one row per loss, stating once what the model and the formats need of it:
 * the per-example losses (and the output as Keras' metrics see it) from the model's output,
 * their gradient, the targets it takes, the activation its output must end in, what Keras'
 * "accuracy" means beside it, and how Keras names it. The model holds its loss (mw_model.loss,
 * an mw_loss); model.c reaches the loss only through its row.
 *
 * Targets: the sparse row takes one int32 label per example; the others K float32 values (the
 * output's width: regression values, one-hot or soft classes, 0/1 or multi-hot labels).
 * Every row keeps the global-batch scaling (the per-example losses summed and divided by the
 * global batch), which makes cluster layouts agree.
 *
 * A final softmax is folded into the categorical rows (the model's output stays logits);
 * a final sigmoid stays a layer, and the binary rows read probabilities, clipped as Keras'
 * JAX backend clips them (from_logits = 0), or logits (from_logits = 1). A new loss is its
 * kind here, its row in loss.c, and its kernel formula (kernels/loss_rules.h). */
#ifndef MW_WORKER_MODEL_LOSS_H
#define MW_WORKER_MODEL_LOSS_H

#include <stdint.h>

#include "kernels/kernels.h"

typedef enum {
    MW_LOSS_SPARSE_XENT, /* SparseCategoricalCrossentropy */
    MW_LOSS_CCE,         /* CategoricalCrossentropy */
    MW_LOSS_BCE,         /* BinaryCrossentropy */
    MW_LOSS_FOCAL,       /* BinaryFocalCrossentropy */
    MW_LOSS_MSE,         /* MeanSquaredError */
    MW_LOSS_MAE,         /* MeanAbsoluteError */
    MW_LOSS_HUBER,       /* Huber */
    MW_LOSS_LOGCOSH,     /* LogCosh */
    MW_LOSS_KINDS
} mw_loss_kind;

/* What the output's last activation must be. */
typedef enum {
    MW_LOSS_OUT_ANY,     /* regression: whatever it is */
    MW_LOSS_OUT_SOFTMAX, /* the categorical rows, from_logits = 0 */
    MW_LOSS_OUT_SIGMOID, /* the binary rows, from_logits = 0 */
} mw_loss_out;

/* A loss as configured (Keras' config of it) and the metrics reported beside it. */
typedef struct {
    mw_loss_kind kind;
    mw_dloss d;             /* the dense rows' parameters (from_logits, label_smoothing, ...) */
    mw_metric_list metrics; /* compile_config's, in its order; none: the loss's default (its
                               row's accuracy, or MAE) */
    unsigned by_shape;      /* bit i: metric i was named "accuracy", whose form Keras picks by
                               the shapes (mw_loss_accuracy_by_shape) */
    int has_ignore;         /* SparseCategoricalCrossentropy(ignore_class=ignore_class): */
    int32_t ignore_class;   /* the examples (or positions) of that label (>= 0) count for
                               nothing, and the loss is divided by the global batch's others
                               (worker/data/data.h, mw_dataset_mask_batches) */
    int weighted_metrics;   /* the metrics are compile_config's weighted_metrics: weighted by the
                               sample weights (mw_metric_list.weighted) */
    int masked;             /* the model's output carries Embedding(mask_zero)'s padding mask
                               (mw_masks_plan): the positions whose input id is 0 count
                               for nothing in the loss (as ignore_class) and the metrics
                               (mw_metric_list.masked) */
} mw_loss;

typedef struct {
    const char *keras;       /* Keras' class ("SparseCategoricalCrossentropy") */
    const char *keras_name;  /* its config's name ("sparse_categorical_crossentropy") */
    const char *alias;       /* the short name keras.losses.get takes too ("mse"), or NULL */
    const char *keys[6];     /* its config keys besides name, reduction and dtype */
    int dense;               /* targets: K floats per example (0: one int32 label) */
    mw_dloss_kind dkind;     /* the dense rows' kernel formula */
    int has_logits;          /* from_logits applies */
    mw_metric_kind accuracy; /* what "accuracy" means with it, its default metric;
                                MW_METRIC_NONE: a regression (MAE by default) */
    /* loss[n] and prob[n x width] (the output as Keras' metrics see it) from out[n x width]
     * and the targets (labels or floats) */
    void (*forward)(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *loss,
                    float *prob, const float *out, const void *y, int n, int width);
    /* dout = scale * d(loss) / d(out), from forward's out and prob */
    void (*backward)(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *dout,
                     const float *out, const float *prob, const void *y, float scale, int n,
                     int width);
} mw_loss_ops;

/* The row of a kind (< MW_LOSS_KINDS). */
const mw_loss_ops *mw_loss_row(mw_loss_kind kind);
/* The kind whose Keras class, config name or alias is name; -1 when none. */
int mw_loss_find(const char *name);
/* "SparseCategoricalCrossentropy, CategoricalCrossentropy, ..." for messages. */
const char *mw_loss_list(void);
/* Today's default: sparse softmax cross-entropy from logits, accuracy. */
void mw_loss_default(mw_loss *ls);
/* The activation the output must end in: from the kind and from_logits. */
mw_loss_out mw_loss_wants(const mw_loss *ls);

/* Bytes of one example's target: 4 (an int32 label) or 4 x width. */
size_t mw_loss_target_bytes(const mw_loss *ls, int width);
/* The metrics reported: ls->metrics, else the row's accuracy, else (a regression) MAE. */
mw_metric_list mw_loss_metrics(const mw_loss *ls);
/* Keras' "accuracy" (compile_utils.get_metric): binary when the output has one unit, sparse
 * categorical beside integer labels, categorical otherwise; set on each metric of ls that
 * was named so. */
void mw_loss_accuracy_by_shape(mw_loss *ls, int width);
/* A metric by Keras' name ("accuracy", "acc", "mae", "mean_absolute_error", "mse", "rmse",
 * "root_mean_squared_error", "binary_accuracy", "categorical_accuracy",
 * "sparse_categorical_accuracy", "auc", and their classes' names); "accuracy" resolves against
 * the loss. MW_METRIC_NONE when unknown (or accuracy beside a regression loss). */
mw_metric_kind mw_metric_find(const char *name, mw_loss_kind loss);
/* How the epoch line names a metric ("Accuracy", "MAE", "MSE", "RMSE", "AUC"), and
 * metrics.csv / TensorBoard ("accuracy", "mae", "mse", "rmse", "auc"). */
const char *mw_metric_label(mw_metric_kind m);
const char *mw_metric_key(mw_metric_kind m);
/* 1 when the epoch line shows it in percent (the accuracies). */
int mw_metric_percent(mw_metric_kind m);
/* How many of the running sums (kernels.h' MW_SUM_*) ml uses: they are what is reduced. */
int mw_sums_len(const mw_metric_list *ml);
/* Metric i's value from the running sums over every replica: the mean of its per-example
 * values (with a mask, of the positions counted; the accuracies in [0, 1]; RMSE the root of
 * the mean), or an AUC from its buckets as Keras' AUC.result computes it. */
double mw_metrics_value(const mw_metric_list *ml, int i, const double *sums);
/* Adds the n examples' metric values (and AUC counts) into acc (MW_SUMS doubles), from host
 * copies of prob (n x positions x width) and the targets (ybytes each); with ml->masked the
 * positions whose input id (ids, n x positions) is 0 do not count; with ml->weighted each
 * position's value counts its sample weight (w, n x positions; NULL: 1). The CPU twin of
 * mw_cuda_metrics_add (kernels/cuda/metrics.h). */
void mw_metrics_add_host(const mw_metric_list *ml, double *acc, const float *prob, const void *y,
                         size_t ybytes, const float *ids, const float *w, int n, int width);

#endif
