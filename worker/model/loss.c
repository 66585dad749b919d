/* The loss table's rows; see loss.h. */
#include "worker/model/loss.h"

#include <stddef.h>

static void xent_forward(const mw_kernels *kt, const mw_kctx *k, float *loss, float *prob,
                         const float *out, const int32_t *labels, int n, int width)
{
    kt->xent_fwd(k, loss, prob, out, labels, n, width);
}

static void xent_backward(const mw_kernels *kt, const mw_kctx *k, float *dout, const float *prob,
                          const int32_t *labels, float scale, int n, int width)
{
    kt->xent_bwd(k, dout, prob, labels, scale, n, width);
}

/* argmax(prob) == label (the first maximum on ties). */
static int argmax_correct(const float *prob, const int32_t *labels, int n, int width)
{
    int correct = 0;
    for (int i = 0; i < n; i++) {
        const float *p = prob + (size_t)i * width;
        int best = 0;
        for (int j = 1; j < width; j++)
            if (p[j] > p[best])
                best = j;
        correct += best == labels[i];
    }
    return correct;
}

static const mw_loss_ops rows[MW_LOSS_KINDS] = {
    [MW_LOSS_SPARSE_XENT] = {.keras = "SparseCategoricalCrossentropy",
                             .keras_name = "sparse_categorical_crossentropy",
                             .forward = xent_forward,
                             .backward = xent_backward,
                             .correct = argmax_correct},
};

const mw_loss_ops *mw_loss_row(mw_loss_kind kind)
{
    return &rows[(unsigned)kind < MW_LOSS_KINDS ? kind : MW_LOSS_SPARSE_XENT];
}
