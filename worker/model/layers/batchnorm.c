/* BatchNormalization, synchronized or not: the layer table's row (worker/model/layer.h), the
 * moving statistics' fold (mw_model_update_stats) and the lockstep steps of a synchronized
 * layer (mw_model_sync_*); model.h says how the statistics travel. */
#include "worker/model/layers/batchnorm.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_batchnorm(mw_model *m, const char *name, float momentum, float epsilon,
                                 int center, int scale, int sync)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_BATCHNORM, name, "BatchNormalization", "batch_normalization");
    if (!l)
        return mw_err_status();
    if (!(momentum >= 0.0f && momentum <= 1.0f) || !(epsilon > 0.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (BatchNormalization): momentum %g, epsilon "
                                         "%g: expected 0 <= momentum <= 1 and epsilon > 0",
                                         l->name, (double)momentum, (double)epsilon));
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->momentum = momentum, l->epsilon = epsilon, l->sync = sync;
    l->w_count = scale ? (size_t)l->in_c : 0;
    l->has_bias = center;
    l->b_count = center ? (size_t)l->in_c : 0;
    l->stats_count = 2 * (size_t)l->in_c;
    l->fan_in = l->fan_out = l->in_c;
    l->kernel_init.kind = MW_INIT_ONES, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static const float *gamma_of(const mw_layer *l, const float *P)
{
    return l->w_count ? P + l->w_off : NULL;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const int C = l->out_c;
    const float *P = c->P, *b = l->b_count ? P + l->b_off : NULL;
    float *st = c->buf;
    if (c->ws->training)
        c->kt->bn_fwd_train(c->k, c->y, st, st + C, st + 2 * C, c->x, gamma_of(l, P), b, c->rows, C,
                            l->epsilon);
    else
        c->kt->bn_fwd_infer(c->k, c->y, c->x, gamma_of(l, P), b, P + l->stats_off,
                            P + l->stats_off + C, c->rows, C, l->epsilon);
}

/* The backward, and the batch statistics into the moving-statistics gradient slots
 * (scale * n * stat; see model.h), through the table: on the GPU both are device memory. */
static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const int C = l->out_c;
    const float *st = c->buf;
    float *G = c->G;
    c->kt->bn_bwd(c->k, c->dx, l->w_count ? G + l->w_off : NULL, l->b_count ? G + l->b_off : NULL,
                  c->dy, c->x, st, st + 2 * C, gamma_of(l, c->P), c->rows, C, c->dx_set);
    c->kt->bn_stats_acc(c->k, G + l->stats_off, st, 2 * (size_t)C, c->scale * (float)c->n);
}

/* Fused with the ReLU after it (layer.h: relu_forward): the training forward only. */
static int relu_forward(const mw_layer_call *c, float M)
{
    const mw_layer *l = c->l;
    if (!c->ws->training || !c->kt->bn_relu_fwd_train || !c->kt->bn_relu_bwd)
        return 0;
    const int C = l->out_c;
    float *st = c->buf;
    c->kt->bn_relu_fwd_train(c->k, c->y, st, st + C, st + 2 * C, c->x, gamma_of(l, c->P),
                             l->b_count ? c->P + l->b_off : NULL, c->rows, C, l->epsilon, M);
    return 1;
}

static void relu_backward(const mw_layer_call *c, float M)
{
    const mw_layer *l = c->l;
    const int C = l->out_c;
    const float *st = c->buf;
    float *G = c->G;
    c->kt->bn_relu_bwd(c->k, c->dx, l->w_count ? G + l->w_off : NULL,
                       l->b_count ? G + l->b_off : NULL, c->dy, c->x, st, st + 2 * C,
                       gamma_of(l, c->P), l->b_count ? c->P + l->b_off : NULL, c->rows, C, M,
                       c->dx_set);
    c->kt->bn_stats_acc(c->k, G + l->stats_off, st, 2 * (size_t)C, c->scale * (float)c->n);
}

/* Batch mean, variance, 1 / stddev (3 C floats, whatever n). */
static size_t buf(const mw_layer *l, size_t n)
{
    (void)n;
    return 3 * (size_t)l->out_c * sizeof(float);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    if (!(t->bn_fwd_train && t->bn_fwd_infer && t->bn_bwd && t->bn_stats_acc && t->bn_stats_update))
        return 0;
    if (l->sync && !(t->bn_sums && t->bn_sync_fwd && t->bn_sync_bwd)) {
        mw_err(MW_EUNSUPPORTED,
               "layer '%s' (BatchNormalization): synchronized true: the %s backend cannot "
               "all-reduce batch statistics yet; train this model on the CPU (--device cpu) or "
               "set synchronized false",
               l->name, t->name);
        return -1;
    }
    return 1;
}

/* center, scale, synchronized, momentum, epsilon. */
static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_flag(d, n, "scale", !!x->w_count, !!y->w_count) ||
           mw_diff_flag(d, n, "center", !!x->b_count, !!y->b_count) ||
           mw_diff_flag(d, n, "synchronized", x->sync, y->sync) ||
           mw_diff_real(d, n, "momentum", x->momentum, y->momentum) ||
           mw_diff_real(d, n, "epsilon", x->epsilon, y->epsilon);
}

/* ---- Keras ---- */

/* The keys Keras writes for BatchNormalization (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("axis"),
    MW_KREAD("momentum"),
    MW_KREAD("epsilon"),
    MW_KREAD("center"),
    MW_KREAD("scale"),
    MW_KREAD("synchronized"),
    MW_KREAD("renorm"),
    MW_KREAD("beta_initializer"),
    MW_KREAD("gamma_initializer"),
    MW_KREAD("moving_mean_initializer"),
    MW_KREAD("moving_variance_initializer"),
    MW_KREAD("beta_regularizer"),
    MW_KREAD("gamma_regularizer"),
    MW_KREAD("beta_constraint"),
    MW_KREAD("gamma_constraint"),
    MW_KREAD("virtual_batch_size"),
    MW_KREAD("adjustment"),
    MW_KIGN("renorm_clipping", "used only with renorm, which must be false"),
    MW_KIGN("renorm_momentum", "used only with renorm, which must be false"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    double mom = 0.99, eps = 1e-3;
    int center = 1, scale = 1, sync = 0, renorm = 0;
    mw_init beta, gamma;
    int p = B->m->next_nin > 0 ? B->m->next_in[0] : B->m->nlayers - 1;
    MW_TRY(mw_kget_bn_axis(L, cfg, p >= 0 ? B->m->layers[p].flat : B->m->flat_input));
    MW_TRY(mw_kget_num(L, "", cfg, "momentum", 0.99, &mom));
    MW_TRY(mw_kget_num(L, "", cfg, "epsilon", 1e-3, &eps));
    MW_TRY(mw_kget_bool(L, cfg, "center", 1, &center));
    MW_TRY(mw_kget_bool(L, cfg, "scale", 1, &scale));
    MW_TRY(mw_kget_bool(L, cfg, "synchronized", 0, &sync));
    MW_TRY(mw_kget_bool(L, cfg, "renorm", 0, &renorm));
    if (renorm)
        return mw_kfail(L, MW_EUNSUPPORTED, "renorm true is not supported; supported: false");
    MW_TRY(mw_kget_init(L, cfg, "beta_initializer", MW_INIT_ZEROS, &beta));
    MW_TRY(mw_kget_init(L, cfg, "gamma_initializer", MW_INIT_ONES, &gamma));
    MW_TRY(mw_kneed_init(L, cfg, "moving_mean_initializer", MW_INIT_ZEROS));
    MW_TRY(mw_kneed_init(L, cfg, "moving_variance_initializer", MW_INIT_ONES));
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer",  "beta_constraint",
                                        "gamma_constraint", "virtual_batch_size", "adjustment"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        MW_TRY(mw_kneed_null(L, cfg, nulls[i],
                             "BatchNormalization regularizers, constraints, "
                             "virtual batches and adjustments"));
    mw_status rc = mw_model_add_batchnorm(B->m, name, (float)mom, (float)eps, center, scale, sync);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    mw_layer *l = &B->m->layers[B->m->nlayers - 1];
    l->kernel_init = gamma, l->bias_init = beta;
    return MW_OK;
}

/* gamma, beta, then the moving statistics: variables of the layer (they go in the files) that
 * Keras does not train (the optimizer's state in .weights.h5 skips them). */
static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    if (l->w_count)
        mw_kvar_add(v, nv, "gamma", l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
    if (l->b_count)
        mw_kvar_add(v, nv, "beta", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
    mw_kvar_add(v, nv, "moving_mean", l->stats_off, (size_t)l->out_c, 1, l->out_c, 0, 0, 0)
        ->trainable = 0;
    mw_kvar_add(v, nv, "moving_variance", l->stats_off + (size_t)l->out_c, (size_t)l->out_c, 1,
                l->out_c, 0, 0, 0)
        ->trainable = 0;
}

const mw_layer_ops mw_layer_batchnorm = {
    .keras = {"BatchNormalization"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .sets_dx = 1,
    .relu_forward = relu_forward,
    .relu_backward = relu_backward,
    .buf_bytes = buf,
    .has_kernels = has_kernels,
    .differs = differs,
    .keras_vars = keras_vars,
};

int mw_model_has_batchnorm(const mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == MW_LAYER_BATCHNORM)
            return 1;
    return 0;
}

void mw_model_update_stats(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, float *params,
                           float *grads)
{
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        if (l->kind == MW_LAYER_BATCHNORM)
            kt->bn_stats_update(k, params + l->stats_off, grads + l->stats_off, l->stats_count,
                                l->momentum);
    }
}

/* ---- synchronized BatchNormalization ---- */

int mw_model_is_sync(const mw_model *m, int i)
{
    return i >= 0 && i < m->nlayers && m->layers[i].kind == MW_LAYER_BATCHNORM && m->layers[i].sync;
}

int mw_model_has_sync(const mw_model *m)
{
    return mw_model_sync_channels(m) > 0;
}

int mw_model_sync_channels(const mw_model *m)
{
    int cmax = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (mw_model_is_sync(m, i) && m->layers[i].out_c > cmax)
            cmax = m->layers[i].out_c;
    return cmax;
}

void mw_model_sync_sums(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model_ws *ws, float *grads, int i, int n, int backward, double *s)
{
    const mw_layer *l = &m->layers[i];
    const int C = l->out_c;
    const float *x = ws->act[l->in[0] + 1], *st = ws->buf[i];
    const size_t rows = (size_t)(n > 0 ? n : 0) * l->out_h * l->out_w;
    /* backward: the same sums are this slice's share of gamma's and beta's gradients (the
     * gradient all-reduce adds the replicas'); they come first, so a 16-bit layer's output
     * gradient is rounded here, as the model's backward does */
    if (backward && l->round_grad && n > 0)
        mw_layer_round(kt, k, l->policy, ws->grad[i + 1], rows * C);
    if (backward)
        kt->bn_sums(k, s, x, ws->grad[i + 1], st, st + 2 * C, l->w_count ? grads + l->w_off : NULL,
                    l->b_count ? grads + l->b_off : NULL, rows, C);
    else
        kt->bn_sums(k, s, x, NULL, NULL, NULL, NULL, NULL, rows, C);
}

void mw_model_sync_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int i, int n, const double *s, long total)
{
    const mw_layer *l = &m->layers[i];
    const float *P = ws->params ? ws->params : m->params.data;
    const int C = l->out_c;
    const float *b = l->b_count ? P + l->b_off : NULL;
    float *st = ws->buf[i];
    const size_t hw = (size_t)l->out_h * l->out_w, rows = (size_t)(n > 0 ? n : 0) * hw;
    kt->bn_sync_fwd(k, ws->act[i + 1], st, st + C, st + 2 * C, ws->act[l->in[0] + 1],
                    gamma_of(l, P), b, s, (double)total * (double)hw, rows, C, l->epsilon);
    if (l->round_out && rows > 0)
        mw_layer_round(kt, k, l->policy, ws->act[i + 1], rows * C);
}

void mw_model_sync_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int i, int n, float scale,
                            const double *s, long total)
{
    const mw_layer *l = &m->layers[i];
    const float *P = ws->params ? ws->params : m->params.data;
    const int C = l->out_c, t = l->in[0] + 1;
    const float *st = ws->buf[i];
    const float *x = ws->act[t], *dy = ws->grad[i + 1];
    const size_t hw = (size_t)l->out_h * l->out_w, rows = (size_t)n * hw;
    if (n <= 0)
        return;
    mw_model_zero_inputs(m, kt, k, ws, i, n);
    if (t > 0)
        kt->bn_sync_bwd(k, ws->grad[t], dy, x, st, st + 2 * C, gamma_of(l, P), s,
                        (double)total * (double)hw, rows, C);
    kt->bn_stats_acc(k, grads + l->stats_off, st, 2 * (size_t)C, scale * (float)n);
}
