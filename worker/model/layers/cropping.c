/* Cropping2D: the layer table's row (worker/model/layer.h). It reuses ZeroPadding2D's kernels:
 * the forward is pad2d_bwd's "add the inner part" into a zeroed output, the backward pads dy
 * with zeros into the layer's buffer (pad2d_fwd) and adds it into dx, so an input read by
 * several layers gets the sum of their gradients. Keras' x[:, k] on a sequence (None, T, D), a
 * GetItem operation node (module keras.src.ops.numpy) in a Functional graph (KerasHub's
 * ViTImageClassifier takes its class token so), is the same crop of one step, its output flat
 * (None, D). */
#include <string.h>

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

/* x[:, k] (k < 0 from the end) of a sequence: the crop of step k, flat. */
static mw_status add_step(mw_model *m, const char *name, int k)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CROP, name, "GetItem", "get_item");
    if (!l)
        return mw_err_status();
    if (l->flat || l->in_h != 1 || k < -l->in_w || k >= l->in_w)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (GetItem): [:, %d] of a %s%dx%dx%d input; "
                                         "expected a sequence (None, steps, features) and a step "
                                         "from %d to %d",
                                         l->name, k, l->flat ? "flat " : "", l->in_h, l->in_w,
                                         l->in_c, -l->in_w, l->in_w - 1));
    k = k < 0 ? k + l->in_w : k;
    l->pad[0] = l->pad[1] = 0, l->pad[2] = k, l->pad[3] = l->in_w - 1 - k;
    l->out_h = 1, l->out_w = 1, l->out_c = l->in_c;
    l->flat = 1;
    return MW_OK;
}

/* The key, inbound_nodes[0].args[1]: [slice(None, None, None), k], as Keras writes x[:, k]. */
static mw_status getitem_key(const mw_klayer *L, const json_t *key, int *k)
{
    mw_kdbuf d;
    const json_t *s = json_array_get(key, 0), *c = json_object_get(s, "config");
    const int all = json_is_object(s) && json_is_string(json_object_get(s, "class_name")) &&
                    !strcmp(json_string_value(json_object_get(s, "class_name")), "__slice__") &&
                    json_is_object(c) && json_is_null(json_object_get(c, "start")) &&
                    json_is_null(json_object_get(c, "stop")) &&
                    json_is_null(json_object_get(c, "step"));
    if (json_is_array(key) && json_array_size(key) == 2 && all &&
        mw_kas_int(json_array_get(key, 1), -MW_KMAX_TENSOR, MW_KMAX_TENSOR, k))
        return MW_OK;
    return mw_kfail(L, MW_EUNSUPPORTED,
                    "inbound_nodes[0].args[1]: the key %s; supported: x[:, k], one step of a "
                    "sequence",
                    mw_kdescribe(d, key));
}

/* GetItem's config: its name alone. */
static const mw_kkey getitem_keys[] = {MW_KEND};

static mw_status parse_getitem(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    int k = 0;
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, getitem_keys, 1));
    MW_TRY(getitem_key(R->L, R->B->key, &k));
    mw_status rc = add_step(R->B->m, name, k);
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

/* Keras' GetItem operation: layers of the crop's kind. */
const mw_layer_ops mw_layer_getitem = {
    .keras = {"GetItem"},
    .module = "keras.src.ops.numpy",
    .parse = parse_getitem,
};
