/* KerasHub's RotaryEmbedding: the layer table's row (worker/model/layer.h). A fixed rotation
 * of each position's features, as KerasHub 0.32 computes it (kernels/rope_rules.h): the
 * features' two halves paired (rotate_half), pair j of step t turned by the angle
 * t * max_wavelength ^ -(2j / D) / scaling_factor, its cosine and sine in float32 (under a
 * mixed policy rounded, and the rotation in 16-bit steps, as KerasHub's). No weights; the
 * gradient is the transposed rotation. The kernels take any group width (a
 * head's features, for an attention's query and key); the layer alone rotates its whole
 * feature axis, rope_type "linear", start_index 0 (a call with start_index or positions is
 * refused by the graph reader, as any call argument other than the inputs). KerasHub's layer
 * does not support masking: Keras drops a padding mask there, and so does this row. */
#include "worker/model/layers/rope.h"

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

mw_status mw_model_add_rope(mw_model *m, const char *name, float max_wavelength, float scale,
                            int denom)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_ROPE, name, "RotaryEmbedding", "rotary_embedding");
    if (!l)
        return mw_err_status();
    if (l->flat || l->in_h != 1 || l->in_c % 2 != 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (RotaryEmbedding): its input is %dx%dx%d; "
                                         "expected a sequence (None, steps, features) with an "
                                         "even number of features (its halves are paired)",
                                         l->name, l->in_h, l->in_w, l->in_c));
    if (!(max_wavelength > 0.0f) || !(scale > 0.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (RotaryEmbedding): max_wavelength %g, "
                                         "scaling_factor %g: expected both > 0",
                                         l->name, (double)max_wavelength, (double)scale));
    if (denom < 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (RotaryEmbedding): denominator_dim %d: "
                                         "expected > 0, or 0 for the input's features",
                                         l->name, denom));
    l->out_h = 1, l->out_w = l->in_w, l->out_c = l->in_c;
    l->rope.max_wavelength = max_wavelength, l->rope.scale = scale;
    l->rope.width = l->in_c;
    l->rope.denom = denom ? denom : l->in_c;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->rope_fwd(c->k, c->y, c->x, c->n, l->out_w, l->out_c, l->rope.width, 0, l->rope.denom,
                    l->rope.max_wavelength, l->rope.scale, mw_policy_half(l->policy));
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->dx)
        c->kt->rope_bwd(c->k, c->dx, c->dy, c->n, l->out_w, l->out_c, l->rope.width, 0,
                        l->rope.denom, l->rope.max_wavelength, l->rope.scale,
                        mw_policy_half(l->policy));
}

/* Under a 16-bit policy the kernels round their own results (the output, and the input's
 * gradient: 0 plus a rounded sum for its one consumer), so the plan adds no rounding pass. */
static int stays_16bit(const mw_layer *l, int backward)
{
    (void)backward;
    return l->policy != MW_POLICY_FLOAT32;
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->rope_fwd && t->rope_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_real(d, n, "max_wavelength", x->rope.max_wavelength, y->rope.max_wavelength) ||
           mw_diff_real(d, n, "scaling_factor", x->rope.scale, y->rope.scale) ||
           mw_diff_dims(d, n, "denominator_dim", &x->rope.denom, &y->rope.denom, 1);
}

/* ---- Keras ---- */

#define MW_ROPE_YARN "YaRN's, used only with rope_type \"yarn\" (refused)"

/* The keys KerasHub 0.32 writes for RotaryEmbedding (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("max_wavelength"),
    MW_KREAD("scaling_factor"),
    MW_KREAD("denominator_dim"),
    MW_KDEF("rope_type", "\"linear\"", "another RoPE scaling (dynamic, yarn)"),
    MW_KDEF("sequence_axis", "1|-2", "a sequence axis other than 1"),
    MW_KDEF("feature_axis", "-1|2", "a feature axis other than the last"),
    MW_KIGN("beta_fast", MW_ROPE_YARN),
    MW_KIGN("beta_slow", MW_ROPE_YARN),
    MW_KIGN("original_max_position_embeddings", MW_ROPE_YARN),
    MW_KIGN("truncate", MW_ROPE_YARN),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    double wl = 10000.0, scale = 1.0;
    int denom = 0;
    MW_TRY(mw_kget_num(L, "", cfg, "max_wavelength", 10000.0, &wl));
    MW_TRY(mw_kget_num(L, "", cfg, "scaling_factor", 1.0, &scale));
    const json_t *dd = json_object_get(cfg, "denominator_dim");
    if (dd && !json_is_null(dd))
        MW_TRY(mw_kget_int(L, cfg, "denominator_dim", 0, 1, 1, MW_KMAX_DIM, &denom));
    mw_status rc = mw_model_add_rope(R->B->m, name, (float)wl, (float)scale, denom);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "max_wavelength", json_real(l->rope.max_wavelength));
    json_object_set_new(c, "scaling_factor", json_real(l->rope.scale));
    json_object_set_new(c, "rope_type", json_string("linear"));
    json_object_set_new(c, "sequence_axis", json_integer(1));
    json_object_set_new(c, "feature_axis", json_integer(-1));
    json_object_set_new(c, "denominator_dim",
                        l->rope.denom == l->rope.width ? json_null() : json_integer(l->rope.denom));
    return l->cls;
}

const mw_layer_ops mw_layer_rope = {
    .keras = {MW_LAYER_KERAS_HUB "RotaryEmbedding"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .stays_16bit = stays_16bit,
    .has_kernels = has_kernels,
    .differs = differs,
    .to_keras = to_keras,
    .mask = mw_mask_drop,
};
