/* Dense: the layer table's row (worker/model/layer.h). */
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_DENSE, name, "Dense", "dense");
    if (!l)
        return mw_err_status();
    if (units <= 0)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL, "layer '%s' (Dense): units %d: expected > 0", l->name, units));
    if (l->in_h != 1 || l->in_w != 1)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Dense): input is %dx%dx%d; Dense needs a "
                                         "flat input (add a Flatten layer before it)",
                                         l->name, l->in_h, l->in_w, l->in_c));
    l->out_h = 1, l->out_w = 1, l->out_c = units;
    l->flat = 1;
    l->w_count = (size_t)l->in_c * units;
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)units : 0;
    l->fan_in = l->in_c, l->fan_out = units;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL, c->n,
                     l->in_c, l->out_c);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                     c->x, c->P + l->w_off, c->n, l->in_c, l->out_c);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "units", &x->out_c, &y->out_c, 1);
}

const mw_layer_ops mw_layer_dense = {
    .keras = {"Dense"},
    .forward = forward,
    .backward = backward,
    .matmul = 1,
    .differs = differs,
};
