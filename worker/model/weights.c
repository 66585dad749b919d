/* The weights' settings: Keras' initializers (mw_model_init_params) and the regularizers'
 * penalty and gradient (mw_model_regularize). See weights.h. */
#include <math.h>
#include <string.h>

#include "worker/model/weights.h"

#include "kernels/ref/table.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

/* Standard normal truncated to |z| < 2 (Keras' truncated_normal: redraw). */
static float truncated_z(mw_rng *r)
{
    float z;
    do
        z = mw_rng_normal(r);
    while (fabsf(z) >= 2.0f);
    return z;
}

void mw_weights_init_tensor(float *p, size_t count, const mw_init *in, int fan_in, int fan_out,
                            mw_rng *r)
{
    const mw_init_kind kind = in->kind;
    double limit, stddev, n;
    switch (kind) {
    case MW_INIT_ZEROS:
        memset(p, 0, count * sizeof *p);
        return;
    case MW_INIT_ONES:
        for (size_t i = 0; i < count; i++)
            p[i] = 1.0f;
        return;
    case MW_INIT_GLOROT_UNIFORM:
    case MW_INIT_HE_UNIFORM:
        limit =
            kind == MW_INIT_GLOROT_UNIFORM ? sqrt(6.0 / (fan_in + fan_out)) : sqrt(6.0 / fan_in);
        for (size_t i = 0; i < count; i++)
            p[i] = (float)((2.0 * mw_rng_uniform(r) - 1.0) * limit);
        return;
    case MW_INIT_GLOROT_NORMAL:
    case MW_INIT_HE_NORMAL:
        /* Keras: truncated normal (|z| < 2), stddev / 0.8796 to keep the variance */
        stddev =
            (kind == MW_INIT_GLOROT_NORMAL ? sqrt(2.0 / (fan_in + fan_out)) : sqrt(2.0 / fan_in)) /
            0.87962566103423978;
        for (size_t i = 0; i < count; i++) {
            float z = truncated_z(r);
            p[i] = (float)(z * stddev);
        }
        return;
    case MW_INIT_VARIANCE_SCALING:
        /* Keras: n = fan_in, fan_out or their mean, at least 1 */
        n = in->mode == MW_FAN_IN    ? fan_in
            : in->mode == MW_FAN_OUT ? fan_out
                                     : (fan_in + fan_out) / 2.0;
        n = n < 1.0 ? 1.0 : n;
        if (in->dist == MW_DIST_UNIFORM) {
            limit = sqrt(3.0 * in->scale / n);
            for (size_t i = 0; i < count; i++)
                p[i] = (float)((2.0 * mw_rng_uniform(r) - 1.0) * limit);
        } else if (in->dist == MW_DIST_UNTRUNCATED_NORMAL) {
            stddev = sqrt(in->scale / n);
            for (size_t i = 0; i < count; i++)
                p[i] = (float)(mw_rng_normal(r) * stddev);
        } else {
            stddev = sqrt(in->scale / n) / 0.87962566103423978;
            for (size_t i = 0; i < count; i++)
                p[i] = (float)(truncated_z(r) * stddev);
        }
        return;
    case MW_INIT_RANDOM_UNIFORM:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + (in->b - in->a) * mw_rng_uniform(r));
        return;
    case MW_INIT_RANDOM_NORMAL:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + in->b * mw_rng_normal(r));
        return;
    case MW_INIT_TRUNCATED_NORMAL:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + in->b * truncated_z(r));
        return;
    case MW_INIT_CONSTANT:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)in->a;
        return;
    }
}

void mw_model_init_params(mw_model *m, uint64_t seed)
{
    memset(m->params.data, 0, m->params.count * sizeof(float));
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        mw_rng r;
        mw_rng_seed(&r, seed, 1000 + (uint64_t)i);
        const mw_layer_ops *row = mw_layer_row(l->kind);
        if (row->init) { /* several tensors, each its own fans */
            row->init(l, m->params.data, &r);
            continue;
        }
        if (l->w_count)
            mw_weights_init_tensor(m->params.data + l->w_off, l->w_count, &l->kernel_init,
                                   l->fan_in, l->fan_out, &r);
        if (l->b_count) /* Keras: a 1-D shape (n) has fan_in = fan_out = n */
            mw_weights_init_tensor(m->params.data + l->b_off, l->b_count, &l->bias_init,
                                   (int)l->b_count, (int)l->b_count, &r);
        for (size_t c = 0; c < l->stats_count / 2; c++) /* moving mean 0, moving variance 1 */
            m->params.data[l->stats_off + l->stats_count / 2 + c] = 1.0f;
    }
}

const mw_regularizer *mw_layer_regularizer(const mw_layer *l, int b)
{
    const mw_regularizer *rg = b ? &l->bias_reg : &l->kernel_reg;
    size_t count = b ? l->b_count : l->w_count;
    return count == 0 || (rg->l1 == 0.0 && rg->l2 == 0.0) ? NULL : rg;
}

int mw_model_has_regularizers(const mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (mw_layer_regularizer(&m->layers[i], 0) || mw_layer_regularizer(&m->layers[i], 1))
            return 1;
    return 0;
}

int mw_model_regularize(const mw_model *m, const mw_kernels *t, const mw_kctx *k,
                        const float *params, float *grads, double *acc, float scale)
{
    return mw_model_regularize_part(m, t, k, params, grads, acc, scale, 0, m->nlayers);
}

int mw_model_regularize_part(const mw_model *m, const mw_kernels *t, const mw_kctx *k,
                             const float *params, float *grads, double *acc, float scale, int from,
                             int to)
{
    int any = 0;
    for (int i = from; i < to; i++) {
        const mw_layer *l = &m->layers[i];
        for (int b = 0; b < 2; b++) {
            const mw_regularizer *rg = mw_layer_regularizer(l, b);
            if (!rg)
                continue;
            size_t off = b ? l->b_off : l->w_off, count = b ? l->b_count : l->w_count;
            t->regularize(k, grads ? grads + off : NULL, acc, params + off, count, rg->l1, rg->l2,
                          scale);
            any = 1;
        }
    }
    return any;
}

double mw_model_regularization(const mw_model *m, float *grads, float scale)
{
    mw_kernels ref;
    mw_kernels_init_ref(&ref);
    mw_kctx k = {.nthreads = 1};
    double total = 0.0;
    mw_model_regularize(m, &ref, &k, m->params.data, grads, &total, scale);
    return total;
}
