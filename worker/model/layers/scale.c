/* keras.applications' own layers (not in keras.layers, so a .keras file names them by module):
 * ConvNeXt's LayerScale (x times a trainable per-channel gamma) and StochasticDepth (at
 * drop_path_rate 0, the applications' default, the identity; above 0 while training each
 * example's branch kept with probability 1 - rate and then divided by it, else 0: Dropout
 * whose mask is one draw per example, layers/dropout.c), Inception-ResNet's
 * CustomScaleLayer (inputs[0] + inputs[1] * scale, an Add of a scaled second input:
 * layers/merge.c). The layer table's rows (worker/model/layer.h). */
#include <string.h>

#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/dropout.h"
#include "worker/model/layers/merge.h"
#include "worker/model/layers/scale.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

mw_status mw_model_add_layer_scale(mw_model *m, const char *name, float init, int dim)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_LAYERSCALE, name, "LayerScale", "layer_scale");
    if (!l)
        return mw_err_status();
    if (dim != l->in_c)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (LayerScale): projection_dim %d but its "
                                         "input has %d channels; expected them equal",
                                         l->name, dim, l->in_c));
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->w_count = (size_t)l->in_c;
    l->fan_in = l->fan_out = l->in_c;
    l->kernel_init = (mw_init){.kind = MW_INIT_CONSTANT, .a = init};
    return MW_OK;
}

/* y (n, H, W, C) = x times gamma (C) on the last axis. */
static mw_bcast_geom gamma_geom(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const size_t C = (size_t)l->out_c;
    return (mw_bcast_geom){{c->n, l->out_h, l->out_w, l->out_c},
                           {C * l->out_h * l->out_w, C * l->out_w, C, 1},
                           {0, 0, 0, 1}};
}

static void forward(const mw_layer_call *c)
{
    const mw_bcast_geom g = gamma_geom(c);
    c->kt->bcast_fwd(c->k, c->y, c->x, c->P + c->l->w_off, &g, 1, 1.0f);
}

static void backward(const mw_layer_call *c)
{
    const mw_bcast_geom g = gamma_geom(c);
    c->kt->bcast_bwd(c->k, c->dx, c->G + c->l->w_off, c->dy, c->x, c->P + c->l->w_off, &g, 1, 1.0f);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->bcast_fwd && t->bcast_bwd;
}

/* Keras' add_weight without a name: "variable". */
static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    mw_kvar_add(v, nv, "variable", l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
}

/* ---- Keras ---- */

/* The modules keras.applications' layers live in (their .keras configs' "module"). */
#define CONVNEXT "keras.src.applications.convnext"
#define INCEPTION_RESNET "keras.src.applications.inception_resnet_v2"

/* The keys Keras writes for LayerScale, StochasticDepth and CustomScaleLayer
 * (worker/model/keras_keys.h). */
static const mw_kkey scale_keys[] = {MW_KREAD("init_values"), MW_KREAD("projection_dim"), MW_KEND},
                     depth_keys[] = {MW_KREAD("drop_path_rate"), MW_KEND},
                     custom_keys[] = {MW_KREAD("scale"), MW_KEND};

static mw_status parse_scale(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    double init = 0.0;
    int dim = 0;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, scale_keys, 1));
    if (!json_object_get(cfg, "init_values"))
        return mw_kfail(L, MW_EMODEL, "init_values is missing; expected a number");
    MW_TRY(mw_kget_num(L, "", cfg, "init_values", 0.0, &init));
    MW_TRY(mw_kget_int(L, cfg, "projection_dim", 0, 1, 1, MW_KMAX_DIM, &dim));
    mw_status rc = mw_model_add_layer_scale(R->B->m, name, (float)init, dim);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static mw_status parse_depth(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    double rate = 0.0;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, depth_keys, 1));
    MW_TRY(mw_kget_num(L, "", cfg, "drop_path_rate", 0.0, &rate));
    if (!(rate >= 0.0 && rate < 1.0))
        return mw_kfail(L, MW_EMODEL, "drop_path_rate %g: expected 0 <= drop_path_rate < 1", rate);
    if (rate > 0.0) {
        mw_status rc = mw_model_add_dropout_noise(R->B->m, name, (float)rate, MW_NOISE_EXAMPLE, 3,
                                                  "StochasticDepth");
        return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
    }
    mw_layer *l =
        mw_layer_push_same(R->B->m, MW_LAYER_IDENTITY, name, "StochasticDepth", "stochastic_depth");
    return l ? MW_OK : mw_kfrom_model(R->B->origin, mw_err_status());
}

static mw_status parse_custom(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    double scale = 0.0;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, custom_keys, 1));
    if (!json_object_get(cfg, "scale"))
        return mw_kfail(L, MW_EMODEL, "scale is missing; expected a number");
    MW_TRY(mw_kget_num(L, "", cfg, "scale", 0.0, &scale));
    if (R->B->m->next_nin < 1)
        return mw_kfail(L, MW_EMODEL, "a merge layer needs a Functional model's inbound_nodes");
    mw_status rc = mw_model_add_scaled_sum(R->B->m, name, (float)scale);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

const mw_layer_ops mw_layer_layerscale = {
    .keras = {"LayerScale"},
    .module = CONVNEXT,
    .parse = parse_scale,
    .forward = forward,
    .backward = backward,
    .has_kernels = has_kernels,
    .keras_vars = keras_vars,
};

const mw_layer_ops mw_layer_stochdepth = {
    .keras = {"StochasticDepth"},
    .module = CONVNEXT,
    .parse = parse_depth,
};

const mw_layer_ops mw_layer_customscale = {
    .keras = {"CustomScaleLayer"},
    .module = INCEPTION_RESNET,
    .parse = parse_custom,
};
