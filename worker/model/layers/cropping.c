/* Cropping2D: the layer table's row (worker/model/layer.h); and a sequence's one step as Keras'
 * GetItem takes it (x[:, k, :]: BERT's pooler), a crop to that step made flat. It reuses
 * ZeroPadding2D's kernels: the forward is pad2d_bwd's "add the inner part" into a zeroed output,
 * the backward pads dy with zeros into the layer's buffer (pad2d_fwd) and adds it into dx, so an
 * input read by several layers gets the sum of their gradients. */
#include "worker/model/layers/cropping.h"

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

static mw_status add(mw_model *m, const char *name, const int c[4])
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CROP, name, "Cropping2D", "cropping2d");
    if (!l)
        return mw_err_status();
    if (l->flat)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Cropping2D): input is flat (None, %d); "
                                         "expected (None, height, width, channels)",
                                         l->name, l->in_c));
    if (c[0] + c[1] >= l->in_h || c[2] + c[3] >= l->in_w)
        return mw_layer_reject(
            m,
            mw_err(MW_EMODEL,
                   "layer '%s' (Cropping2D): cutting %d+%d rows and %d+%d columns of its "
                   "%dx%dx%d input leaves nothing; expected fewer than %d rows and %d columns "
                   "cut",
                   l->name, c[0], c[1], c[2], c[3], l->in_h, l->in_w, l->in_c, l->in_h, l->in_w));
    for (int s = 0; s < 4; s++)
        l->pad[s] = c[s];
    l->out_h = l->in_h - c[0] - c[1], l->out_w = l->in_w - c[2] - c[3], l->out_c = l->in_c;
    return MW_OK;
}

mw_status mw_model_add_take_step(mw_model *m, const char *name, int k)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CROP, name, "GetItem", "get_item");
    if (!l)
        return mw_err_status();
    const int t = k < 0 ? l->in_w + k : k;
    if (l->flat || l->in_h != 1 || t < 0 || t >= l->in_w)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (GetItem): [:, %d, :] of a %dx%dx%d input; "
                                         "expected a sequence (None, steps, features) with step "
                                         "%d among its %d",
                                         l->name, k, l->in_h, l->in_w, l->in_c, k, l->in_w));
    l->pad[2] = t, l->pad[3] = l->in_w - 1 - t;
    l->out_h = 1, l->out_w = 1, l->out_c = l->in_c;
    l->flat = 1;
    return MW_OK;
}

/* The keys Keras writes for Cropping2D (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {MW_KREAD("cropping"), MW_KREAD("data_format"), MW_KEND};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    int c[4];
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, keys, 1));
    MW_TRY(mw_kcheck_data_format(R->L, cfg));
    MW_TRY(mw_kget_sides(R->L, cfg, "cropping", 0, c));
    MW_TRY(mw_kneed_channels(R->B, R->L));
    mw_status rc = add(R->B->m, name, c);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    mw_layer_zero(c->kt, c->k, c->y, c->cnt * sizeof *c->y);
    c->kt->pad2d_bwd(c->k, c->y, c->x, l->out_h, l->out_w, l->out_c, l->pad[0], l->pad[1],
                     l->pad[2], l->pad[3], c->n);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (!c->dx)
        return;
    c->kt->pad2d_fwd(c->k, c->buf, c->dy, l->out_h, l->out_w, l->out_c, l->pad[0], l->pad[1],
                     l->pad[2], l->pad[3], c->n);
    c->kt->acc(c->k, c->dx, c->buf, (size_t)c->n * l->in_h * l->in_w * l->in_c);
}

/* dy padded to the input's shape. */
static size_t buf(const mw_layer *l, size_t n)
{
    return n * l->in_h * l->in_w * l->in_c * sizeof(float);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->pad2d_fwd && t->pad2d_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "cropping", x->pad, y->pad, 4);
}

const mw_layer_ops mw_layer_crop = {
    .keras = {"Cropping2D"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .buf_bytes = buf,
    .stays_16bit = mw_layer_stays_16bit_always,
    .has_kernels = has_kernels,
    .differs = differs,
};
