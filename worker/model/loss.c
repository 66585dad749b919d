/* The loss table's rows and the metrics beside them; see loss.h. */
#include "worker/model/loss.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h"

static void xent_forward(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *loss,
                         float *prob, const float *out, const void *y, int n, int width)
{
    (void)ls;
    kt->xent_fwd(k, loss, prob, out, (const int32_t *)y, n, width);
}

static void xent_backward(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *dout,
                          const float *out, const float *prob, const void *y, float scale, int n,
                          int width)
{
    (void)ls, (void)out;
    kt->xent_bwd(k, dout, prob, (const int32_t *)y, scale, n, width);
}

static void dense_forward(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *loss,
                          float *prob, const float *out, const void *y, int n, int width)
{
    kt->dloss_fwd(k, &ls->d, loss, prob, out, (const float *)y, n, width);
}

static void dense_backward(const mw_kernels *kt, const mw_kctx *k, const mw_loss *ls, float *dout,
                           const float *out, const float *prob, const void *y, float scale, int n,
                           int width)
{
    kt->dloss_bwd(k, &ls->d, dout, out, prob, (const float *)y, scale, n, width);
}

#define DENSE .dense = 1, .forward = dense_forward, .backward = dense_backward
#define REGRESSION(k) .dkind = (k), .accuracy = MW_METRIC_NONE, DENSE

static const mw_loss_ops rows[] = {
    [MW_LOSS_SPARSE_XENT] = {"SparseCategoricalCrossentropy",
                             "sparse_categorical_crossentropy",
                             NULL,
                             {"from_logits", "ignore_class"},
                             .has_logits = 1,
                             .accuracy = MW_METRIC_SPARSE_ACC,
                             .forward = xent_forward,
                             .backward = xent_backward},
    [MW_LOSS_CCE] = {"CategoricalCrossentropy",
                     "categorical_crossentropy",
                     NULL,
                     {"from_logits", "label_smoothing", "axis"},
                     .dkind = MW_DLOSS_CCE,
                     .has_logits = 1,
                     .accuracy = MW_METRIC_CAT_ACC,
                     DENSE},
    [MW_LOSS_BCE] = {"BinaryCrossentropy",
                     "binary_crossentropy",
                     NULL,
                     {"from_logits", "label_smoothing", "axis"},
                     .dkind = MW_DLOSS_BCE,
                     .has_logits = 1,
                     .accuracy = MW_METRIC_BIN_ACC,
                     DENSE},
    [MW_LOSS_FOCAL] = {"BinaryFocalCrossentropy",
                       "binary_focal_crossentropy",
                       NULL,
                       {"from_logits", "label_smoothing", "axis", "gamma", "alpha",
                        "apply_class_balancing"},
                       .dkind = MW_DLOSS_FOCAL,
                       .has_logits = 1,
                       .accuracy = MW_METRIC_BIN_ACC,
                       DENSE},
    [MW_LOSS_MSE] =
        {"MeanSquaredError", "mean_squared_error", "mse", {NULL}, REGRESSION(MW_DLOSS_MSE)},
    [MW_LOSS_MAE] =
        {"MeanAbsoluteError", "mean_absolute_error", "mae", {NULL}, REGRESSION(MW_DLOSS_MAE)},
    [MW_LOSS_HUBER] = {"Huber", "huber_loss", "huber", {"delta"}, REGRESSION(MW_DLOSS_HUBER)},
    [MW_LOSS_LOGCOSH] = {"LogCosh", "log_cosh", "logcosh", {NULL}, REGRESSION(MW_DLOSS_LOGCOSH)},
};
_Static_assert(sizeof rows / sizeof *rows == MW_LOSS_KINDS, "a row per mw_loss_kind");

const mw_loss_ops *mw_loss_row(mw_loss_kind kind)
{
    return &rows[(unsigned)kind < MW_LOSS_KINDS ? kind : MW_LOSS_SPARSE_XENT];
}

int mw_loss_find(const char *name)
{
    for (int i = 0; name && i < MW_LOSS_KINDS; i++)
        if (!strcmp(name, rows[i].keras) || !strcmp(name, rows[i].keras_name) ||
            (rows[i].alias && !strcmp(name, rows[i].alias)))
            return i;
    return -1;
}

const char *mw_loss_list(void)
{
    static char list[512];
    if (!list[0])
        for (int i = 0; i < MW_LOSS_KINDS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     rows[i].keras);
    return list;
}

void mw_loss_default(mw_loss *ls)
{
    memset(ls, 0, sizeof *ls);
    ls->kind = MW_LOSS_SPARSE_XENT;
    ls->d.from_logits = 1;
    ls->d.delta = 1.0f, ls->d.gamma = 2.0f, ls->d.alpha = 0.25f;
}

mw_loss_out mw_loss_wants(const mw_loss *ls)
{
    const mw_loss_ops *r = mw_loss_row(ls->kind);
    if (!r->has_logits || ls->d.from_logits)
        return MW_LOSS_OUT_ANY;
    return r->accuracy == MW_METRIC_BIN_ACC ? MW_LOSS_OUT_SIGMOID : MW_LOSS_OUT_SOFTMAX;
}

size_t mw_loss_target_bytes(const mw_loss *ls, int width)
{
    return mw_loss_row(ls->kind)->dense ? (size_t)width * sizeof(float) : sizeof(int32_t);
}

mw_metric_list mw_loss_metrics(const mw_loss *ls)
{
    mw_metric_list d = ls->metrics;
    if (d.n <= 0) { /* the loss's default: a classifier's own accuracy, a regression's MAE */
        const mw_metric_kind acc = mw_loss_row(ls->kind)->accuracy;
        d = (mw_metric_list){1, {acc != MW_METRIC_NONE ? acc : MW_METRIC_MAE}, 1, 0, 0};
    }
    d.masked = ls->masked;
    d.weighted = ls->weighted_metrics;
    return d;
}

void mw_loss_accuracy_by_shape(mw_loss *ls, int width)
{
    for (int i = 0; i < ls->metrics.n; i++)
        if (ls->by_shape & (1u << i))
            ls->metrics.kind[i] = width == 1                      ? MW_METRIC_BIN_ACC
                                  : !mw_loss_row(ls->kind)->dense ? MW_METRIC_SPARSE_ACC
                                                                  : MW_METRIC_CAT_ACC;
}

static const struct {
    const char *names[4];
    mw_metric_kind kind;
} metric_names[] = {
    {{"mae", "mean_absolute_error", "MeanAbsoluteError"}, MW_METRIC_MAE},
    {{"mse", "mean_squared_error", "MeanSquaredError"}, MW_METRIC_MSE},
    {{"rmse", "root_mean_squared_error", "RootMeanSquaredError"}, MW_METRIC_RMSE},
    {{"binary_accuracy", "BinaryAccuracy"}, MW_METRIC_BIN_ACC},
    {{"categorical_accuracy", "CategoricalAccuracy"}, MW_METRIC_CAT_ACC},
    {{"sparse_categorical_accuracy", "SparseCategoricalAccuracy"}, MW_METRIC_SPARSE_ACC},
    {{"auc", "AUC"}, MW_METRIC_AUC},
};

mw_metric_kind mw_metric_find(const char *name, mw_loss_kind loss)
{
    if (!name)
        return MW_METRIC_NONE;
    if (!strcmp(name, "accuracy") || !strcmp(name, "acc")) /* by the shapes: see loss.h */
        return mw_loss_row(loss)->accuracy;
    for (size_t i = 0; i < sizeof metric_names / sizeof metric_names[0]; i++)
        for (int j = 0; j < 4 && metric_names[i].names[j]; j++)
            if (!strcmp(name, metric_names[i].names[j]))
                return metric_names[i].kind;
    return MW_METRIC_NONE;
}

const char *mw_metric_label(mw_metric_kind m)
{
    static const char *const l[] = {"Accuracy", "Accuracy", "Accuracy", "Accuracy",
                                    "MAE",      "MSE",      "RMSE",     "AUC"};
    _Static_assert(sizeof l / sizeof *l == MW_METRIC_AUC + 1, "a label per mw_metric_kind");
    return (unsigned)m < sizeof l / sizeof l[0] ? l[m] : "Accuracy";
}

const char *mw_metric_key(mw_metric_kind m)
{
    static const char *const l[] = {"accuracy", "accuracy", "accuracy", "accuracy",
                                    "mae",      "mse",      "rmse",     "auc"};
    _Static_assert(sizeof l / sizeof *l == MW_METRIC_AUC + 1, "a key per mw_metric_kind");
    return (unsigned)m < sizeof l / sizeof l[0] ? l[m] : "accuracy";
}

int mw_metric_percent(mw_metric_kind m)
{
    return m == MW_METRIC_SPARSE_ACC || m == MW_METRIC_CAT_ACC || m == MW_METRIC_BIN_ACC;
}

int mw_sums_len(const mw_metric_list *ml)
{
    for (int i = 0; i < ml->n; i++)
        if (ml->kind[i] == MW_METRIC_AUC)
            return MW_SUMS;
    return MW_SUM_METRIC(ml->n);
}

/* Keras' AUC.result (ROC, interpolation): the true and false positive rates at each threshold
 * from the bucket counts (a rate with nothing to count is 0, as divide_no_nan makes it), and
 * the trapezoids between neighbouring thresholds summed. */
static double auc_value(const double *sums)
{
    const double *pos = sums + MW_SUM_AUC_POS, *neg = sums + MW_SUM_AUC_NEG;
    double tp[MW_AUC_THRESHOLDS + 1] = {0}, fp[MW_AUC_THRESHOLDS + 1] = {0};
    for (int j = MW_AUC_THRESHOLDS - 1; j >= 0; j--)
        tp[j] = tp[j + 1] + pos[j], fp[j] = fp[j + 1] + neg[j];
    const double P = tp[0], N = fp[0];
    double auc = 0;
    for (int j = 0; j + 1 < MW_AUC_THRESHOLDS; j++) {
        const double x0 = N > 0 ? fp[j] / N : 0, x1 = N > 0 ? fp[j + 1] / N : 0;
        const double y0 = P > 0 ? tp[j] / P : 0, y1 = P > 0 ? tp[j + 1] / P : 0;
        auc += (x0 - x1) * (y0 + y1) / 2;
    }
    return auc;
}

double mw_metrics_value(const mw_metric_list *ml, int i, const double *sums)
{
    if (i < 0 || i >= ml->n)
        return 0;
    if (ml->kind[i] == MW_METRIC_AUC)
        return auc_value(sums);
    const double count = sums[ml->masked || ml->weighted ? MW_SUM_VALID : MW_SUM_COUNT];
    const double sum = sums[MW_SUM_METRIC(i)];
    const double mean = count > 0 ? sum / count : 0;
    return ml->kind[i] == MW_METRIC_RMSE ? sqrt(mean) : mean;
}

void mw_metrics_add_host(const mw_metric_list *ml, double *acc, const float *prob, const void *y,
                         size_t ybytes, const float *ids, const float *w, int n, int width)
{
    const size_t P = (size_t)(ml->positions > 1 ? ml->positions : 1), per = P * width;
    for (int i = 0; i < n; i++)
        metrics_add_example(ml, acc, prob + (size_t)i * per,
                            (const uint8_t *)y + (size_t)i * ybytes, width,
                            ml->masked && ids ? ids + (size_t)i * P : NULL,
                            ml->weighted && w ? w + (size_t)i * P : NULL);
}
