/* RMS normalization: the layer table's rows (worker/model/layer.h) of Keras 3.15's
 * RMSNormalization, of LayerNormalization(rms_scaling=True) (read by layers/layernorm.c), and
 * of KerasHub 0.32's LlamaLayerNorm and Gemma's RMSNormalization (named by their modules: the
 * latter shares its class name with Keras' own). Over the last axis (the channels) of each
 * position: a flat input (None, D), a sequence (None, T, D) or an image's pixels; one weight of
 * D values; each example alone, so nothing crosses replicas. The four differ in the statistic
 * (the mean of the squares, or rms_scaling's variance around the mean, which still scales x
 * itself, not x - mean), the weight's name and initializer, and Gemma's (1 + scale). */
#include <string.h>

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/rmsnorm.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

/* The modules KerasHub's classes live in (their .keras configs' "module"). */
#define LLAMA "keras_hub.src.models.llama.llama_layernorm"
#define GEMMA "keras_hub.src.models.gemma.rms_normalization"

static const struct {
    const char *cls, *base, *var;
    int centered;
    float offset;
    mw_init_kind init;
} classes[] = {
    [MW_RMS_KERAS] = {"RMSNormalization", "rms_normalization", "scale", 0, 0.0f, MW_INIT_ONES},
    [MW_RMS_LN] = {"LayerNormalization", "layer_normalization", "gamma", 1, 0.0f, MW_INIT_ONES},
    [MW_RMS_LLAMA] = {"LlamaLayerNorm", "llama_layer_norm", "scale", 0, 0.0f, MW_INIT_ONES},
    [MW_RMS_GEMMA] = {"RMSNormalization", "rms_normalization", "scale", 0, 1.0f, MW_INIT_ZEROS},
};

mw_status mw_model_add_rmsnorm(mw_model *m, const char *name, mw_rms_class cls, float epsilon)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_RMSNORM, name, classes[cls].cls, classes[cls].base);
    if (!l)
        return mw_err_status();
    if (!(epsilon > 0.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL, "layer '%s' (%s): epsilon %g: expected > 0",
                                         l->name, classes[cls].cls, (double)epsilon));
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->epsilon = epsilon;
    l->rms_class = (int)cls;
    l->w_count = (size_t)l->in_c;
    l->fan_in = l->fan_out = l->in_c;
    l->kernel_init.kind = classes[cls].init;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->rmsnorm_fwd(c->k, c->y, c->buf, c->x, c->P + l->w_off, (int)c->rows, l->out_c,
                       l->epsilon, classes[l->rms_class].centered, classes[l->rms_class].offset);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->rmsnorm_bwd(c->k, c->dx, c->G + l->w_off, c->dy, c->x, c->buf, c->P + l->w_off,
                       (int)c->rows, l->out_c, classes[l->rms_class].offset);
}

/* Fused with the residual Add before it (layer.h: add_forward). */
static void add_forward(const mw_layer_call *c, const float *a, const float *b)
{
    const mw_layer *l = c->l;
    c->kt->add_rmsnorm_fwd(c->k, c->x, c->y, c->buf, a, b, c->P + l->w_off, (int)c->rows, l->out_c,
                           l->epsilon, classes[l->rms_class].centered,
                           classes[l->rms_class].offset);
}

static void add_backward(const mw_layer_call *c, float *da, float *db)
{
    const mw_layer *l = c->l;
    c->kt->add_rmsnorm_bwd(c->k, da, db, c->G + l->w_off, c->dx, c->dy, c->x, c->buf,
                           c->P + l->w_off, (int)c->rows, l->out_c, classes[l->rms_class].offset);
}

/* Each position's mean (0 but for rms_scaling) and 1 / sqrt(v + epsilon). */
static size_t buf(const mw_layer *l, size_t n)
{
    return 2 * n * (size_t)l->out_h * l->out_w * sizeof(float);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->rmsnorm_fwd && t->rmsnorm_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_real(d, n, "epsilon", x->epsilon, y->epsilon) ||
           mw_diff_flag(d, n, "the variance (rms_scaling)", classes[x->rms_class].centered,
                        classes[y->rms_class].centered) ||
           mw_diff_flag(d, n, "(1 + scale)", classes[x->rms_class].offset != 0.0f,
                        classes[y->rms_class].offset != 0.0f);
}

/* LayerNormalization passes a padding mask on (supports_masking); Keras 3.15's
 * RMSNormalization and KerasHub's two do not support masking, so Keras drops it there. A part
 * of a KerasHub block (LlamaTransformerDecoder's LlamaLayerNorm) runs inside the block's call,
 * which merges its input's mask into its attention's and keeps it on its output: there the
 * mask goes through. */
static mw_mask_rule mask(const mw_layer *l)
{
    return l->rms_class == MW_RMS_LN || l->block ? MW_MASK_PASS : MW_MASK_DROP;
}

static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    mw_kvar_add(v, nv, classes[l->rms_class].var, l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
}

/* ---- Keras ---- */

/* The keys Keras and KerasHub write for the classes (worker/model/keras_keys.h). */
static const mw_kkey keras_keys[] = {MW_KREAD("axis"), MW_KREAD("epsilon"), MW_KEND},
                     hub_keys[] = {MW_KREAD("epsilon"), MW_KEND};

/* Reads epsilon (def when absent; Keras' RMSNormalization's null: backend.epsilon(), 1e-7) and
 * adds the layer. */
static mw_status add(mw_kread *R, const json_t *cfg, const char *name, mw_rms_class cls)
{
    const json_t *e = json_object_get(cfg, "epsilon");
    double eps = 1e-6;
    MW_TRY(mw_kneed_channels(R->B, R->L)); /* a (None, H, W) input's last axis is not C */
    if (cls == MW_RMS_KERAS && json_is_null(e))
        eps = 1e-7;
    else
        MW_TRY(mw_kget_num(R->L, "", cfg, "epsilon", 1e-6, &eps));
    mw_status rc = mw_model_add_rmsnorm(R->B->m, name, cls, (float)eps);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static mw_status parse_keras(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, keras_keys, 1));
    MW_TRY(mw_kget_last_axis(R->L, cfg, R->B));
    return add(R, cfg, name, MW_RMS_KERAS);
}

static mw_status parse_llama(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, hub_keys, 1));
    return add(R, cfg, name, MW_RMS_LLAMA);
}

static mw_status parse_gemma(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, hub_keys, 1));
    return add(R, cfg, name, MW_RMS_GEMMA);
}

const mw_layer_ops mw_layer_rmsnorm = {
    .keras = {"RMSNormalization"},
    .parse = parse_keras,
    .forward = forward,
    .backward = backward,
    .add_forward = add_forward,
    .add_backward = add_backward,
    .buf_bytes = buf,
    .has_kernels = has_kernels,
    .differs = differs,
    .mask = mask,
    .keras_vars = keras_vars,
};

const mw_layer_ops mw_layer_rmsnorm_llama = {
    .keras = {"LlamaLayerNorm"},
    .module = LLAMA,
    .parse = parse_llama,
};

const mw_layer_ops mw_layer_rmsnorm_gemma = {
    .keras = {"RMSNormalization"},
    .module = GEMMA,
    .parse = parse_gemma,
};
