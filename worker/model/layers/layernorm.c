/* LayerNormalization: the layer table's row (worker/model/layer.h). Over the last axis (the
 * channels) of each position: a flat input (None, D), a sequence (None, T, D) or an image's
 * pixels; gamma (scale) and beta (center) of D values; each example alone, so nothing crosses
 * replicas. With rms_scaling it is an RMS normalization's (layers/rmsnorm.c). */
#include "worker/model/layers/layernorm.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/rmsnorm.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

void mw_layernorm_affine(mw_layer *l, float epsilon, int center, int scale)
{
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->epsilon = epsilon;
    l->w_count = scale ? (size_t)l->in_c : 0;
    l->has_bias = center;
    l->b_count = center ? (size_t)l->in_c : 0;
    l->fan_in = l->fan_out = l->in_c;
    l->kernel_init.kind = MW_INIT_ONES, l->bias_init.kind = MW_INIT_ZEROS;
}

mw_status mw_model_add_layernorm(mw_model *m, const char *name, float epsilon, int center,
                                 int scale)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_LAYERNORM, name, "LayerNormalization", "layer_normalization");
    if (!l)
        return mw_err_status();
    if (!(epsilon > 0.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (LayerNormalization): epsilon %g: expected "
                                         "> 0",
                                         l->name, (double)epsilon));
    mw_layernorm_affine(l, epsilon, center, scale);
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const float *P = c->P;
    c->kt->layernorm_fwd(c->k, c->y, c->buf, c->x, l->w_count ? P + l->w_off : NULL,
                         l->b_count ? P + l->b_off : NULL, (int)c->rows, l->out_c, l->epsilon);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->layernorm_bwd(c->k, c->dx, l->w_count ? c->G + l->w_off : NULL,
                         l->b_count ? c->G + l->b_off : NULL, c->dy, c->x, c->buf,
                         l->w_count ? c->P + l->w_off : NULL, (int)c->rows, l->out_c);
}

/* Fused with the residual Add before it (layer.h: add_forward). */
static void add_forward(const mw_layer_call *c, const float *a, const float *b)
{
    const mw_layer *l = c->l;
    const float *P = c->P;
    c->kt->add_layernorm_fwd(c->k, c->x, c->y, c->buf, a, b, l->w_count ? P + l->w_off : NULL,
                             l->b_count ? P + l->b_off : NULL, (int)c->rows, l->out_c, l->epsilon);
}

static void add_backward(const mw_layer_call *c, float *da, float *db)
{
    const mw_layer *l = c->l;
    c->kt->add_layernorm_bwd(c->k, da, db, l->w_count ? c->G + l->w_off : NULL,
                             l->b_count ? c->G + l->b_off : NULL, c->dx, c->dy, c->x, c->buf,
                             l->w_count ? c->P + l->w_off : NULL, (int)c->rows, l->out_c);
}

/* Each position's mean and 1 / stddev. */
static size_t buf(const mw_layer *l, size_t n)
{
    return 2 * n * (size_t)l->out_h * l->out_w * sizeof(float);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->layernorm_fwd && t->layernorm_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_real(d, n, "epsilon", x->epsilon, y->epsilon) ||
           mw_diff_flag(d, n, "scale", x->w_count > 0, y->w_count > 0) ||
           mw_diff_flag(d, n, "center", x->b_count > 0, y->b_count > 0);
}

/* ---- Keras ---- */

/* The keys Keras writes for LayerNormalization (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KNORM_KEYS,
    MW_KREAD("rms_scaling"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    mw_knorm n;
    int rms = 0;
    MW_TRY(mw_kread_norm(L, cfg, B, &n));
    MW_TRY(mw_kget_bool(L, cfg, "rms_scaling", 0, &rms));
    if (rms)
        MW_TRY(mw_kneed_channels(B, L)); /* a (None, H, W) input's last axis is not C */
    /* rms_scaling: x / sqrt(var + epsilon) * gamma, with gamma whatever scale says and no beta
     * whatever center says, as Keras 3.15 builds it (layers/rmsnorm.c) */
    mw_status rc = rms ? mw_model_add_rmsnorm(B->m, name, MW_RMS_LN, (float)n.epsilon)
                       : mw_model_add_layernorm(B->m, name, (float)n.epsilon, n.center, n.scale);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    mw_layer *l = &B->m->layers[B->m->nlayers - 1];
    l->kernel_init = n.gamma, l->bias_init = n.beta;
    return MW_OK;
}

void mw_layernorm_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    if (l->w_count)
        mw_kvar_add(v, nv, "gamma", l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
    if (l->b_count)
        mw_kvar_add(v, nv, "beta", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

const mw_layer_ops mw_layer_layernorm = {
    .keras = {"LayerNormalization"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .add_forward = add_forward,
    .add_backward = add_backward,
    .buf_bytes = buf,
    .has_kernels = has_kernels,
    .differs = differs,
    .mask = mw_mask_pass,
    .keras_vars = mw_layernorm_keras_vars,
};
