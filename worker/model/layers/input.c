/* A named input's InputLayer: the layer table's row (worker/model/layer.h).
 *
 * A model of several named inputs (worker/model/inputs.h) receives each example as one row,
 * its inputs side by side. Each InputLayer is a layer of the model that copies its part out
 * of that row, so that what reads it (an Embedding, a KerasHub block's padding mask) finds a
 * contiguous (None, T) tensor as it would the model's only input. The copy is a crop of the
 * row seen as a 1 x width image of one channel: ZeroPadding2D's kernels, forward only (ids
 * have no gradient). */
#include "worker/model/layers/input.h"

#include "worker/model/diff.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_input_part(mw_model *m, const char *name, int off, int width)
{
    const int in = -1;
    MW_TRY(mw_model_set_inputs(m, &in, 1));
    mw_layer *l = mw_layer_push(m, MW_LAYER_INPUT, name, "InputLayer", "input_layer");
    if (!l)
        return mw_err_status();
    if (off < 0 || width <= 0 || off + width > l->in_c || l->in_h != 1 || l->in_w != 1)
        return mw_layer_reject(m, mw_err(MW_EINTERNAL,
                                         "InputLayer '%s': part %d..%d of a %dx%dx%d input row",
                                         l->name, off, off + width, l->in_h, l->in_w, l->in_c));
    l->part_off = off;
    l->out_h = 1, l->out_w = 1, l->out_c = width;
    l->flat = 1;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    mw_layer_zero(c->kt, c->k, c->y, c->cnt * sizeof *c->y);
    c->kt->pad2d_bwd(c->k, c->y, c->x, 1, l->out_c, 1, 0, 0, l->part_off,
                     l->in_c - l->part_off - l->out_c, c->n);
}

static void backward(const mw_layer_call *c)
{
    (void)c; /* the input row holds ids: no gradient */
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->pad2d_bwd != NULL;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "the input's place in the row", &x->part_off, &y->part_off, 1);
}

const mw_layer_ops mw_layer_input = {
    .forward = forward,
    .backward = backward,
    .has_kernels = has_kernels,
    .differs = differs,
    .stays_16bit = mw_layer_stays_16bit_always,
};
