/* Embedding: the layer table's row (worker/model/layer.h). The model's input (None, T) of
 * token ids, held as floats (exact below 2^24; the session checks every id of the data against
 * input_dim before training), into (None, T, output_dim): (1, T, output_dim) here. */
#include "worker/keras/keras_layer.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_embedding(mw_model *m, const char *name, int input_dim, int output_dim)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_EMBED, name, "Embedding", "embedding");
    if (!l)
        return mw_err_status();
    if (input_dim <= 0 || output_dim <= 0 || input_dim > MW_EMBED_MAX_VOCAB)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Embedding): input_dim %d, output_dim %d: "
                                         "expected 1..%d and > 0",
                                         l->name, input_dim, output_dim, MW_EMBED_MAX_VOCAB));
    if (l->nin != 1 || l->in[0] != -1 || !l->flat)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Embedding): its input must be the model's "
                                         "input of token ids (None, sequence length)",
                                         l->name));
    l->pad[0] = input_dim;
    l->out_h = 1, l->out_w = l->in_c, l->out_c = output_dim;
    l->flat = 0;
    l->w_count = (size_t)input_dim * output_dim;
    l->fan_in = input_dim, l->fan_out = output_dim;
    l->kernel_init.kind = MW_INIT_RANDOM_UNIFORM;
    l->kernel_init.a = -0.05, l->kernel_init.b = 0.05;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->embed_fwd(c->k, c->y, c->x, c->P + l->w_off, c->n, l->out_w, l->out_c, l->pad[0]);
}

/* The ids get no gradient (the model's input): only the table's rows. */
static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->embed_bwd(c->k, c->G + l->w_off, c->dy, c->x, c->n, l->out_w, l->out_c, l->pad[0]);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->embed_fwd && t->embed_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const int a[2] = {x->pad[0], x->out_c}, b[2] = {y->pad[0], y->out_c};
    return mw_diff_dims(d, n, "input_dim x output_dim", a, b, 2) ||
           mw_diff_flag(d, n, "mask_zero", x->mask_zero, y->mask_zero);
}

/* ---- Keras ---- */

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    (void)cls;
    int vocab = 0, dim = 0, mask = 0;
    mw_init init;
    MW_TRY(mw_kget_int(L, cfg, "input_dim", 0, 1, 1, MW_EMBED_MAX_VOCAB, &vocab));
    MW_TRY(mw_kget_int(L, cfg, "output_dim", 0, 1, 1, MW_KMAX_DIM, &dim));
    MW_TRY(mw_kget_bool(L, cfg, "mask_zero", 0, &mask));
    MW_TRY(mw_kneed_null(L, cfg, "embeddings_regularizer", "a penalty on the embeddings"));
    MW_TRY(mw_kneed_null(L, cfg, "activity_regularizer", "a penalty on the output"));
    MW_TRY(mw_kneed_null(L, cfg, "embeddings_constraint", "a constraint on the embeddings"));
    MW_TRY(mw_kneed_null(L, cfg, "lora_rank", "LoRA"));
    MW_TRY(mw_kget_init(L, cfg, "embeddings_initializer", MW_INIT_RANDOM_UNIFORM, &init));
    const json_t *given = json_object_get(cfg, "embeddings_initializer");
    if (!given || json_is_null(given)) /* Keras' default, "uniform" */
        init.a = -0.05, init.b = 0.05;
    if ((long long)vocab * dim > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%d embedding table is larger than the %d values supported per "
                        "tensor",
                        vocab, dim, MW_KMAX_TENSOR);
    mw_status rc = mw_model_add_embedding(B->m, name, vocab, dim);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].kernel_init = init;
    B->m->layers[B->m->nlayers - 1].mask_zero = mask;
    return MW_OK;
}

/* 1 when layer i's output carries the padding mask (its masked planned). */
static int carries(const mw_model *m, int i)
{
    if (i < 0)
        return 0;
    const mw_layer *l = &m->layers[i];
    switch (l->kind) {
    case MW_LAYER_EMBED:
        return l->mask_zero;
    case MW_LAYER_MHA: /* the query's mask (Keras: the first argument's) */
        return l->masked & 1;
    case MW_LAYER_AVGPOOL: /* the masked mean consumes it */
        return 0;
    default:
        return l->masked != 0;
    }
}

/* 1 when l passes a mask on as Keras 3 does (supports_masking, the steps kept). */
static int passes(const mw_layer *l)
{
    switch (l->kind) {
    case MW_LAYER_DROPOUT:
    case MW_LAYER_IDENTITY:
    case MW_LAYER_RELU:
    case MW_LAYER_ACT:
    case MW_LAYER_LAYERNORM:
    case MW_LAYER_ADD:
    case MW_LAYER_MULTIPLY:
        return 1;
    case MW_LAYER_DENSE: /* on each position of a sequence */
        return !l->flat;
    default:
        return 0;
    }
}

mw_status mw_model_plan_masks(mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        int from = -1; /* a masked input's producer */
        l->masked = 0;
        for (int j = 0; j < l->nin; j++)
            if (carries(m, l->in[j]))
                l->masked |= 1 << j, from = l->in[j];
        if (!l->masked || passes(l) || l->kind == MW_LAYER_MHA ||
            (l->kind == MW_LAYER_AVGPOOL && l->global && l->in_h == 1))
            continue;
        l->masked = 0;
        return mw_err(MW_EUNSUPPORTED,
                      "layer '%s' (%s) gets the padding mask of Embedding(mask_zero=True) (through "
                      "'%s'); supported there yet: GlobalAveragePooling1D, MultiHeadAttention, "
                      "and the layers that keep the steps (Dense, LayerNormalization, Add, "
                      "Multiply, Dropout, Activation)",
                      l->name, l->cls, mw_model_producer_name(m, from));
    }
    if (m->nlayers > 0 && carries(m, m->nlayers - 1))
        return mw_err(MW_EUNSUPPORTED,
                      "the model's output (layer '%s') carries the padding mask of "
                      "Embedding(mask_zero=True), which Keras applies to a per-position loss; "
                      "supported yet: a mask consumed by GlobalAveragePooling1D",
                      mw_model_producer_name(m, m->nlayers - 1));
    return MW_OK;
}

const mw_layer_ops mw_layer_embed = {
    .keras = {"Embedding"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .has_kernels = has_kernels,
    .differs = differs,
};
