/* EinsumDense: the layer table's row (worker/model/layer.h) for the equations that are a Dense
 * on the last axis, "<P>x,xy-><P>y" (P the batch and any other kept axes, or "...": e.g.
 * "ab,bc->ac", "abc,cd->abd", "...b,bc->...c"), with bias_axes "" or "y" — the feed-forward
 * projections of KerasHub's models. Its kernel (x, y) and bias (y) are Dense's, so it runs on
 * the dense kernels; the other equations (a projection into several axes, as an attention's
 * "btd,dnh->btnh") are refused naming the equation. */
#include <string.h>

#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/dense.h"
#include "worker/model/model.h"

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                     c->n * l->in_w, l->in_c, l->out_c);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                     c->x, c->P + l->w_off, c->n * l->in_w, l->in_c, l->out_c);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "output width", &x->out_c, &y->out_c, 1) ||
           mw_diff_flag(d, n, "bias", x->has_bias, y->has_bias);
}

/* The equation's kept axes P and its contracted and new letters x, y, for an input of rank
 * (batch included); 0 when it is not "<P>x,xy-><P>y". */
static int dense_form(const char *eq, int rank, char *xy)
{
    const char *comma = strchr(eq, ','), *arrow = strstr(eq, "->");
    if (!comma || !arrow || arrow < comma)
        return 0;
    const size_t ni = (size_t)(comma - eq), nk = (size_t)(arrow - comma - 1);
    const char *in = eq, *ker = comma + 1, *out = arrow + 2;
    const size_t no = strlen(out);
    const int dots = ni >= 4 && !strncmp(in, "...", 3);
    if (nk != 2 || ni < 2 || no != ni || (!dots && (int)ni != rank))
        return 0;
    xy[0] = in[ni - 1], xy[1] = ker[1];
    if (ker[0] != xy[0] || out[no - 1] != xy[1] || xy[0] == xy[1] || strncmp(in, out, ni - 1))
        return 0;
    for (size_t i = dots ? 3 : 0; i + 1 < ni; i++) /* P: letters other than x and y */
        if (in[i] == xy[0] || in[i] == xy[1] || in[i] < 'a' || in[i] > 'z')
            return 0;
    return xy[0] >= 'a' && xy[0] <= 'z' && xy[1] >= 'a' && xy[1] <= 'z';
}

/* ---- Keras ---- */

/* The keys Keras 3.15 writes for EinsumDense (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("equation"),
    MW_KREAD("output_shape"),
    MW_KREAD("bias_axes"),
    MW_KWEIGHT_KEYS,
    MW_KDEF("quantization_config", "null", "quantized weights"),
    MW_KEND,
};

/* output_shape's last entry: the units (n, or a list whose other entries are the kept axes). */
static mw_status read_units(const mw_klayer *L, const json_t *cfg, int *units)
{
    const json_t *v = json_object_get(cfg, "output_shape");
    mw_kdbuf d;
    if (json_is_array(v) && json_array_size(v) >= 1)
        v = json_array_get(v, json_array_size(v) - 1);
    if (!mw_kas_int(v, 1, MW_KMAX_DIM, units))
        return mw_kfail(L, MW_EMODEL, "output_shape: found %s; expected the units last",
                        mw_kdescribe(d, json_object_get(cfg, "output_shape")));
    return MW_OK;
}

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    const char *eq = json_string_value(json_object_get(cfg, "equation"));
    const char *ba = json_string_value(json_object_get(cfg, "bias_axes"));
    const int p = B->m->next_nin > 0 ? B->m->next_in[0] : B->m->nlayers - 1;
    const int flat = p >= 0 ? B->m->layers[p].flat : B->m->flat_input;
    char xy[2];
    mw_kqbuf q;
    if (!eq || !dense_form(eq, flat ? 2 : 3, xy))
        return mw_kfail(
            L, MW_EUNSUPPORTED,
            "equation %s: supported: a Dense on the last axis, \"<kept axes>x,xy-><kept "
            "axes>y\" (e.g. \"abc,cd->abd\", \"...b,bc->...c\")",
            mw_kquote(q, eq ? eq : "(missing)"));
    if (ba && *ba && (strlen(ba) != 1 || ba[0] != xy[1]))
        return mw_kfail(L, MW_EUNSUPPORTED, "bias_axes %s: supported: \"\", null or \"%c\"",
                        mw_kquote(q, ba), xy[1]);
    int units = 0;
    mw_kweights w;
    MW_TRY(read_units(L, cfg, &units));
    MW_TRY(mw_kread_weights(L, cfg, R->is_last, &w));
    w.use_bias = ba && *ba;
    mw_layer *l = mw_layer_push(B->m, MW_LAYER_EINSUM, name, "EinsumDense", "einsum_dense");
    if (!l)
        return mw_kfrom_model(B->origin, mw_err_status());
    if (l->in_h != 1 || (!l->flat && l->in_w < 1))
        return mw_layer_reject(B->m, mw_kfail(L, MW_EMODEL,
                                              "its input is %dx%dx%d; expected "
                                              "(None, features) or a sequence",
                                              l->in_h, l->in_w, l->in_c));
    l->out_h = 1, l->out_w = l->in_w, l->out_c = units;
    l->w_count = (size_t)l->in_c * units, l->fan_in = l->in_c, l->fan_out = units;
    l->has_bias = w.use_bias, l->b_count = w.use_bias ? (size_t)units : 0;
    MW_TRY(mw_kapply_weights(B, &w));
    return mw_model_add_act(B->m, NULL, w.act, mw_act_info_of(w.act)->param, 1);
}

const mw_layer_ops mw_layer_einsum = {
    .keras = {"EinsumDense"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .matmul = 1,
    .differs = differs,
    .mask = mw_dense_mask_rule,
    .keras_vars = mw_dense_keras_vars,
};
