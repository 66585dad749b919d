/* GroupNormalization: the layer table's row (worker/model/layer.h). Over the channels (the last
 * axis) of an image (None, H, W, C), a sequence (None, T, C) or a flat input (None, C): the C
 * channels in G groups of C / G, each example's group normalized over its positions and its
 * channels (kernels/groupnorm_rules.h), then gamma (scale) and beta (center) per channel, as
 * Keras 3.15 computes it; groups -1 is one group per channel (instance normalization). Each
 * example alone, so nothing crosses replicas; a padding mask passes, the statistics counting
 * every step as Keras' do. */
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/layernorm.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

/* GroupNormalization(groups, axis=-1, epsilon, center, scale) on the current input. */
static mw_status add_groupnorm(mw_model *m, const char *name, int groups, float epsilon, int center,
                               int scale)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_GROUPNORM, name, "GroupNormalization", "group_normalization");
    if (!l)
        return mw_err_status();
    if (groups == -1)
        groups = l->in_c;
    if (groups < 1 || l->in_c % groups != 0 || !(epsilon > 0.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (GroupNormalization): groups %d, epsilon %g "
                                         "on %d channels: expected groups dividing the channels "
                                         "(or -1) and epsilon > 0",
                                         l->name, groups, (double)epsilon, l->in_c));
    l->groups = groups;
    mw_layernorm_affine(l, epsilon, center, scale);
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->groupnorm_fwd(c->k, c->y, c->buf, c->x, l->w_count ? c->P + l->w_off : NULL,
                         l->b_count ? c->P + l->b_off : NULL, c->n, l->out_h * l->out_w, l->out_c,
                         l->groups, l->epsilon);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->groupnorm_bwd(c->k, c->dx, l->w_count ? c->G + l->w_off : NULL,
                         l->b_count ? c->G + l->b_off : NULL, c->dy, c->x, c->buf,
                         l->w_count ? c->P + l->w_off : NULL, c->n, l->out_h * l->out_w, l->out_c,
                         l->groups);
}

/* Each example's groups' means and 1 / stddevs. */
static size_t buf(const mw_layer *l, size_t n)
{
    return 2 * n * (size_t)l->groups * sizeof(float);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->groupnorm_fwd && t->groupnorm_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "groups", &x->groups, &y->groups, 1) ||
           mw_diff_real(d, n, "epsilon", x->epsilon, y->epsilon) ||
           mw_diff_flag(d, n, "scale", x->w_count > 0, y->w_count > 0) ||
           mw_diff_flag(d, n, "center", x->b_count > 0, y->b_count > 0);
}

/* ---- Keras ---- */

/* The keys Keras 3.15 writes for GroupNormalization. */
static const mw_kkey keys[] = {
    MW_KREAD("groups"),
    MW_KNORM_KEYS,
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    mw_knorm n;
    int groups = 32;
    MW_TRY(mw_kget_int(L, cfg, "groups", 32, 0, -1, MW_KMAX_DIM, &groups));
    MW_TRY(mw_kread_norm(L, cfg, R->B, &n));
    if (groups == 0)
        return mw_kfail(L, MW_EMODEL, "groups: found 0; expected a positive integer or -1");
    mw_status rc = add_groupnorm(R->B->m, name, groups, (float)n.epsilon, n.center, n.scale);
    if (rc != MW_OK)
        return mw_kfrom_model(R->B->origin, rc);
    mw_layer *l = &R->B->m->layers[R->B->m->nlayers - 1];
    l->kernel_init = n.gamma, l->bias_init = n.beta;
    return MW_OK;
}

const mw_layer_ops mw_layer_groupnorm = {
    .keras = {"GroupNormalization"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .buf_bytes = buf,
    .has_kernels = has_kernels,
    .differs = differs,
    .mask = mw_mask_pass,
    .keras_vars = mw_layernorm_keras_vars,
};
