/* KerasHub's Vision Transformer layers (keras_hub/src/models/vit/vit_layers.py, KerasHub 0.32),
 * read from their configs and built from this program's own layers, and the one thing they
 * need that no other kind computes: the class token, a learned row put before the patches.
 *
 * ViTPatchingAndEmbedding on an image (None, H, W, C), hidden_dim D, patch (ph, pw):
 *
 *     p = Conv2D(D, (ph, pw), strides (ph, pw), valid)(x)    patch_embedding
 *     s = reshape(p, (None, patches, D))
 *     s = concat([class_token, s], axis 1)                   class_token (1, 1, D), when
 *                                                            use_class_token
 *     y = s + position_embedding(arange(num_positions))      an Embedding's (positions, D)
 *
 * ViTEncoder on (None, T, D): Dropout(dropout_rate), num_layers ViTEncoderBlock, then a
 * LayerNormalization "ln"; each ViTEncoderBlock (pre-norm):
 *
 *     a = x + Dropout(MultiHeadAttention(LN(x), LN(x)))      layer_norm_1, mha, dropout
 *     y = a + Drop(Dense(D)(Drop(Dense(mlp_dim, gelu)(LN(a)))))   layer_norm_2, mlp
 *
 * (one Dropout layer called twice in the MLP). Each class is one Keras layer made of several of
 * this program's (mw_layer.block, as layers/transformer.c does for KerasHub's
 * TransformerEncoder): their variables lie in the Keras layer's .weights.h5 group under the
 * attribute paths of its sublayers (a ViTEncoder's encoder_layers/vi_t_encoder_block_1/mha,
 * ...), in Keras' weight order (part_rank), and the summary names them <layer>/<sublayer> by
 * their Keras names (vit_encoder/transformer_block_1/ln_1). A Dropout of rate 0 is Keras'
 * identity and is not built. These classes are not registered with Keras: a .keras names them
 * by class and module alone. */
#include <stdio.h>
#include <string.h>

#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/attention.h"
#include "worker/model/layers/conv2d.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/dropout.h"
#include "worker/model/layers/embedding.h"
#include "worker/model/layers/layernorm.h"
#include "worker/model/layers/merge.h"
#include "worker/model/layers/reshape.h"
#include "worker/model/model.h"

#define VIT_MODULE "keras_hub.src.models.vit.vit_layers"

/* ---- the class token: (None, T, D) into (None, T + 1, D), its row (D) first ---- */

static mw_status add_class_token(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CLSTOKEN, name, "ClassToken", "class_token");
    if (!l)
        return mw_err_status();
    if (l->flat || l->in_h != 1)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (class token): its input is %dx%dx%d; "
                                         "expected a sequence (None, steps, features)",
                                         l->name, l->in_h, l->in_w, l->in_c));
    l->out_h = 1, l->out_w = l->in_w + 1, l->out_c = l->in_c;
    l->w_count = (size_t)l->in_c;
    l->fan_in = 1, l->fan_out = l->in_c;
    l->kernel_init = (mw_init){.kind = MW_INIT_RANDOM_NORMAL, .a = 0.0, .b = 0.05};
    return MW_OK;
}

/* Each example's output: the token, then its input's T rows. */
static void token_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const size_t row = (size_t)l->out_c, per = (size_t)l->out_w * row;
    c->kt->concat_fwd(c->k, c->y, c->x, (size_t)c->n, (int)(per - row), (int)per, (int)row);
    for (int i = 0; i < c->n; i++)
        mw_layer_copy(c->kt, c->k, c->y + i * per, c->P + l->w_off, row);
}

/* The token's gradient is the sum of every example's first row (in example order: the same
 * sums on any backend); the input's, the other rows. */
static void token_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const size_t row = (size_t)l->out_c, per = (size_t)l->out_w * row;
    if (c->dx)
        c->kt->concat_bwd(c->k, c->dx, c->dy, (size_t)c->n, (int)(per - row), (int)per, (int)row);
    for (int i = 0; i < c->n; i++)
        c->kt->acc(c->k, c->G + l->w_off, c->dy + i * per, row);
}

/* Under a 16-bit policy the token is a float32 weight, so the output needs rounding; the input's
 * gradient is a part of the output's, 16-bit when that is. */
static int token_16bit(const mw_layer *l, int backward)
{
    (void)l;
    return backward;
}

static int token_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->concat_fwd && t->concat_bwd && t->acc;
}

/* The token is ViTPatchingAndEmbedding's own variable, vars/0 of its group. */
static void token_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    mw_kvar_add(v, nv, "class_token", l->w_off, l->w_count, 3, 1, 1, l->out_c, 0);
}

const mw_layer_ops mw_layer_clstoken = {
    .forward = token_forward,
    .backward = token_backward,
    .stays_16bit = token_16bit,
    .has_kernels = token_kernels,
    .keras_vars = token_keras_vars,
};

/* ---- the parts of a block ---- */

typedef struct {
    mw_model *m;
    const char *block, *cls; /* the Keras layer's name and class */
    int head;                /* its first layer */
    const char *path;        /* the sublayers' attribute path ("" or "encoder_layers/..._1/") */
    const char *kname;       /* their Keras names' prefix ("<block>/" or "<block>/<sub>/") */
} builder;

/* The layers added since first become part sub (.weights.h5 path: b->path + sub; "" for the
 * block's own arithmetic), named b->kname + name, of weight rank rank. */
static void tag(const builder *b, int first, const char *sub, const char *name, int rank)
{
    for (int j = first; j < b->m->nlayers; j++) {
        mw_layer *l = &b->m->layers[j];
        l->block = b->head + 1, l->block_first = j == b->head, l->block_cls = b->cls;
        l->part_rank = rank;
        snprintf(l->part, sizeof l->part, "%s%s", *sub ? b->path : "", sub);
        snprintf(l->block_name, sizeof l->block_name, "%s", b->block);
        if (!l->folded)
            snprintf(l->name, sizeof l->name, "%.70s%.25s", b->kname, name);
    }
}

/* The next layer reads layer in (-1: the model's input). */
static mw_status from(builder *b, int in, int *first)
{
    *first = b->m->nlayers;
    return mw_model_set_inputs(b->m, &in, 1);
}

static mw_status dropout(builder *b, int in, double rate, const char *sub, const char *name,
                         int *out)
{
    int first;
    *out = in;
    if (rate <= 0.0)
        return MW_OK;
    MW_TRY(from(b, in, &first));
    MW_TRY(mw_model_add_dropout(b->m, NULL, (float)rate));
    tag(b, first, sub, name, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status residual(builder *b, int x, int y, const char *name, int *out)
{
    const int first = b->m->nlayers, in[2] = {x, y};
    MW_TRY(mw_model_set_inputs(b->m, in, 2));
    MW_TRY(mw_model_add_add(b->m, NULL));
    tag(b, first, "", name, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status norm(builder *b, int in, double eps, const char *sub, const char *name, int *out)
{
    int first;
    MW_TRY(from(b, in, &first));
    MW_TRY(mw_model_add_layernorm(b->m, NULL, (float)eps, 1, 1));
    tag(b, first, sub, name, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

/* ---- ViTPatchingAndEmbedding ---- */

typedef struct {
    int image[2], patch[2], hidden, channels, patches, positions, cls_token, bias;
} embed_cfg;

/* The keys KerasHub writes (num_patches and num_positions follow from the others, and its
 * constructor takes neither), and the constructor's use_patch_bias and data_format, which its
 * get_config leaves out (worker/model/keras_keys.h). */
static const mw_kkey embed_keys[] = {
    MW_KREAD("image_size"),      MW_KREAD("patch_size"),
    MW_KREAD("hidden_dim"),      MW_KREAD("num_channels"),
    MW_KREAD("num_patches"),     MW_KREAD("num_positions"),
    MW_KREAD("use_class_token"), MW_KREAD("use_patch_bias"),
    MW_KREAD("data_format"),     MW_KEND,
};

/* A derived key, when present, must be what the others give. */
static mw_status derived(const mw_klayer *L, const json_t *cfg, const char *key, int want,
                         const embed_cfg *c)
{
    int got = want;
    MW_TRY(mw_kget_int(L, cfg, key, want, 0, 1, MW_KMAX_TENSOR, &got));
    if (got != want)
        return mw_kfail(L, MW_EMODEL,
                        "%s %d: expected %d from image_size [%d, %d], patch_size [%d, %d] and "
                        "use_class_token %s",
                        key, got, want, c->image[0], c->image[1], c->patch[0], c->patch[1],
                        c->cls_token ? "true" : "false");
    return MW_OK;
}

static mw_status embed_read(const mw_klayer *L, const json_t *cfg, const int s[3], embed_cfg *c)
{
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_pair(L, cfg, "image_size", 0, 1, MW_KMAX_DIM, c->image));
    MW_TRY(mw_kget_pair(L, cfg, "patch_size", 0, 1, MW_KMAX_WINDOW, c->patch));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &c->hidden));
    MW_TRY(mw_kget_int(L, cfg, "num_channels", 3, 0, 1, MW_KMAX_DIM, &c->channels));
    MW_TRY(mw_kget_bool(L, cfg, "use_class_token", 1, &c->cls_token));
    MW_TRY(mw_kget_bool(L, cfg, "use_patch_bias", 1, &c->bias));
    if (c->image[0] != s[0] || c->image[1] != s[1] || c->channels != s[2])
        return mw_kfail(L, MW_EMODEL,
                        "image_size [%d, %d] and num_channels %d, but its input is %dx%dx%d; "
                        "expected the input's",
                        c->image[0], c->image[1], c->channels, s[0], s[1], s[2]);
    if (c->patch[0] > s[0] || c->patch[1] > s[1])
        return mw_kfail(L, MW_EMODEL, "patch_size [%d, %d] is larger than the %dx%d image",
                        c->patch[0], c->patch[1], s[0], s[1]);
    c->patches = (s[0] / c->patch[0]) * (s[1] / c->patch[1]);
    c->positions = c->patches + c->cls_token;
    MW_TRY(derived(L, cfg, "num_patches", c->patches, c));
    return derived(L, cfg, "num_positions", c->positions, c);
}

/* Keras' weight order: class_token, patch_embedding's, position_embedding's. */
enum { RANK_TOKEN, RANK_PATCH, RANK_POSITION };

static mw_status embed_build(builder *b, int x, const embed_cfg *c)
{
    mw_model *m = b->m;
    int first, s;
    MW_TRY(from(b, x, &first));
    MW_TRY(mw_model_add_conv2d(m, NULL, c->hidden, c->patch[0], c->patch[1], c->patch[0],
                               c->patch[1], 0, c->bias));
    tag(b, first, "patch_embedding", "patch_embedding", RANK_PATCH);
    const int dims[2] = {-1, c->hidden};
    MW_TRY(mw_model_add_reshape(m, NULL, dims, 2));
    tag(b, first + 1, "", "reshape", 0);
    s = m->nlayers - 1;
    if (c->cls_token) {
        MW_TRY(from(b, s, &first));
        MW_TRY(add_class_token(m, NULL));
        tag(b, first, "", "class_token", RANK_TOKEN);
        snprintf(m->layers[first].name, sizeof m->layers[first].name, "%s", b->block);
        s = first;
    }
    MW_TRY(from(b, s, &first));
    MW_TRY(mw_model_add_position_embedding(m, NULL, c->positions));
    m->layers[first].kernel_init = (mw_init){.kind = MW_INIT_RANDOM_NORMAL, .a = 0.0, .b = 0.02};
    tag(b, first, "position_embedding", "position_embedding", RANK_POSITION);
    int y;
    return residual(b, s, first, "add", &y);
}

/* ---- ViTEncoder, ViTEncoderBlock ---- */

typedef struct {
    int layers, heads, hidden, mlp, mha_bias, mlp_bias;
    double dropout, attention_dropout, epsilon;
} encoder_cfg;

#define ENCODER_KEYS                                                                               \
    MW_KREAD("num_heads"), MW_KREAD("hidden_dim"), MW_KREAD("mlp_dim"), MW_KREAD("use_mha_bias"),  \
        MW_KREAD("use_mlp_bias"), MW_KREAD("dropout_rate"), MW_KREAD("attention_dropout"),         \
        MW_KREAD("layer_norm_epsilon")
static const mw_kkey encoder_keys[] = {MW_KREAD("num_layers"), ENCODER_KEYS, MW_KEND};
static const mw_kkey block_keys[] = {MW_KREAD("key_dim"), ENCODER_KEYS, MW_KEND};

static mw_status rate(const mw_klayer *L, const json_t *cfg, const char *key, double *out)
{
    MW_TRY(mw_kget_num(L, "", cfg, key, 0.0, out));
    if (!(*out >= 0.0 && *out < 1.0))
        return mw_kfail(L, MW_EMODEL, "%s %g: expected 0 <= %s < 1", key, *out, key);
    return MW_OK;
}

static mw_status encoder_read(const mw_klayer *L, const char *cls, const json_t *cfg, int width,
                              encoder_cfg *c)
{
    const int block = !strcmp(cls, "ViTEncoderBlock");
    c->layers = 1;
    if (!block) /* a block's 16 Keras variables at most, the final LayerNormalization's 2 */
        MW_TRY(
            mw_kget_int(L, cfg, "num_layers", 0, 1, 1, (MW_KERAS_MAX_VARS - 2) / 16, &c->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &c->heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &c->hidden));
    MW_TRY(mw_kget_int(L, cfg, "mlp_dim", 0, 1, 1, MW_KMAX_DIM, &c->mlp));
    MW_TRY(mw_kget_bool(L, cfg, "use_mha_bias", 1, &c->mha_bias));
    MW_TRY(mw_kget_bool(L, cfg, "use_mlp_bias", 1, &c->mlp_bias));
    MW_TRY(rate(L, cfg, "dropout_rate", &c->dropout));
    MW_TRY(rate(L, cfg, "attention_dropout", &c->attention_dropout));
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-6, &c->epsilon));
    if (!(c->epsilon > 0.0 && c->epsilon < 1.0))
        return mw_kfail(L, MW_EMODEL, "layer_norm_epsilon %g: expected 0 < epsilon < 1",
                        c->epsilon);
    if (c->hidden != width)
        return mw_kfail(L, MW_EMODEL, "hidden_dim %d, but its input has %d features", c->hidden,
                        width);
    if (c->heads > c->hidden)
        return mw_kfail(L, MW_EMODEL,
                        "num_heads %d is more than hidden_dim %d: each head's key_dim "
                        "(hidden_dim / num_heads) would be 0",
                        c->heads, c->hidden);
    int kd = c->hidden / c->heads;
    if (block)
        MW_TRY(mw_kget_int(L, cfg, "key_dim", kd, 0, 1, MW_KMAX_DIM, &kd));
    if (kd != c->hidden / c->heads)
        return mw_kfail(L, MW_EMODEL, "key_dim %d: expected hidden_dim %d / num_heads %d, %d", kd,
                        c->hidden, c->heads, c->hidden / c->heads);
    return MW_OK;
}

static mw_status mlp_dense(builder *b, int in, int units, const encoder_cfg *c, mw_activation act,
                           const char *sub, int *out)
{
    int first;
    MW_TRY(from(b, in, &first));
    MW_TRY(mw_model_add_dense(b->m, NULL, units, c->mlp_bias));
    const mw_init kinit = {.kind = MW_INIT_GLOROT_UNIFORM},
                  binit = {.kind = MW_INIT_RANDOM_NORMAL, .a = 0.0, .b = 1e-6};
    MW_TRY(mw_model_set_init(b->m, &kinit, &binit));
    MW_TRY(mw_model_add_act(b->m, NULL, act, mw_act_info_of(act)->param, 1));
    tag(b, first, sub, sub, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

/* One ViTEncoderBlock on x, its sublayers under b->path, named under b->kname. */
static mw_status encoder_block(builder *b, int x, const encoder_cfg *c, int *out)
{
    int n, a, f, first;
    const int kd = c->hidden / c->heads;
    MW_TRY(norm(b, x, c->epsilon, "layer_norm_1", "ln_1", &n));
    const int qv[2] = {n, n};
    first = b->m->nlayers;
    MW_TRY(mw_model_set_inputs(b->m, qv, 2));
    MW_TRY(mw_model_add_mha(b->m, NULL, c->heads, kd, kd, 0, c->mha_bias,
                            (float)c->attention_dropout, 0));
    tag(b, first, "mha", "mha", 0);
    MW_TRY(dropout(b, first, c->dropout, "dropout", "dropout", &a));
    MW_TRY(residual(b, a, x, "add", &a));
    MW_TRY(norm(b, a, c->epsilon, "layer_norm_2", "ln_2", &n));
    MW_TRY(mlp_dense(b, n, c->mlp, c, MW_ACT_GELU, "mlp/dense_1", &f));
    MW_TRY(dropout(b, f, c->dropout, "mlp/dropout", "mlp/dropout", &f));
    MW_TRY(mlp_dense(b, f, c->hidden, c, MW_ACT_LINEAR, "mlp/dense_2", &f));
    MW_TRY(dropout(b, f, c->dropout, "", "mlp/dropout_1", &f)); /* the same Keras layer */
    return residual(b, a, f, "add_1", out);
}

static mw_status encoder_build(builder *b, int x, const encoder_cfg *c, int single)
{
    if (single)
        return encoder_block(b, x, c, &x);
    MW_TRY(dropout(b, x, c->dropout, "dropout", "dropout", &x));
    const char *block = b->block;
    for (int k = 0; k < c->layers; k++) {
        char path[48], kname[80];
        if (k)
            snprintf(path, sizeof path, "encoder_layers/vi_t_encoder_block_%d/", k);
        else
            snprintf(path, sizeof path, "encoder_layers/vi_t_encoder_block/");
        snprintf(kname, sizeof kname, "%.48s/transformer_block_%d/", block, k + 1);
        b->path = path, b->kname = kname;
        MW_TRY(encoder_block(b, x, c, &x));
    }
    char kname[56];
    snprintf(kname, sizeof kname, "%.48s/", block);
    b->path = "", b->kname = kname;
    return norm(b, x, c->epsilon, "layer_norm", "ln", &x);
}

/* ---- the reader ---- */

/* The classes, as static text (mw_layer.block_cls), and Keras' automatic names' bases. */
static const char *const classes[][2] = {
    {"ViTPatchingAndEmbedding", "vi_t_patching_and_embedding"},
    {"ViTEncoder", "vi_t_encoder"},
    {"ViTEncoderBlock", "vi_t_encoder_block"},
};

/* Class cls's static text and, when name is NULL, Keras' automatic name of its n-th layer
 * (vi_t_encoder, vi_t_encoder_1, ...) into buf. */
static const char *class_of(const mw_model *m, const char *cls, const char **name, char *buf,
                            size_t len)
{
    size_t k = 0;
    while (k + 1 < sizeof classes / sizeof classes[0] && strcmp(cls, classes[k][0]))
        k++;
    int same = 0;
    for (int j = 0; j < m->nlayers; j++)
        same += m->layers[j].block_first && !strcmp(m->layers[j].block_cls, classes[k][0]);
    if (!*name && same)
        snprintf(buf, len, "%s_%d", classes[k][1], same);
    else if (!*name)
        snprintf(buf, len, "%s", classes[k][1]);
    if (!*name)
        *name = buf;
    return classes[k][0];
}

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    mw_model *m = R->B->m;
    const int embed = !strcmp(cls, "ViTPatchingAndEmbedding");
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg,
                          embed                             ? embed_keys
                          : !strcmp(cls, "ViTEncoderBlock") ? block_keys
                                                            : encoder_keys,
                          1));
    const int x = m->next_nin ? m->next_in[0] : m->nlayers - 1;
    int s[3];
    mw_model_shape_of(m, x, s);
    const int flat = x < 0 ? m->flat_input : m->layers[x].flat;
    if (flat || (embed ? 0 : s[0] != 1))
        return mw_kfail(L, MW_EMODEL, "its input ('%s') is %s%dx%dx%d; expected %s",
                        mw_model_producer_name(m, x), flat ? "flat " : "", s[0], s[1], s[2],
                        embed ? "an image (None, height, width, channels)"
                              : "a sequence (None, steps, features)");
    embed_cfg ec = {0};
    encoder_cfg nc = {0};
    if (embed)
        MW_TRY(embed_read(L, cfg, s, &ec));
    else
        MW_TRY(encoder_read(L, cls, cfg, s[2], &nc));
    char buf[64];
    m->next_nin = 0;
    const char *scls = class_of(m, cls, &name, buf, sizeof buf);
    builder b = {m, name, scls, m->nlayers, "", ""};
    char kname[72];
    snprintf(kname, sizeof kname, "%.62s/", b.block);
    b.kname = kname;
    const int first = m->nlayers;
    mw_status rc = embed ? embed_build(&b, x, &ec)
                         : encoder_build(&b, x, &nc, !strcmp(cls, "ViTEncoderBlock"));
    if (rc != MW_OK) {
        m->nlayers = first; /* nothing of the layer stays */
        m->next_nin = 0;
        return mw_kfrom_model(R->B->origin, rc);
    }
    return MW_OK;
}

/* A row that reads Keras classes into layers of the other rows' kinds (and the class token's). */
const mw_layer_ops mw_layer_vit = {
    .keras = {"ViTPatchingAndEmbedding", "ViTEncoder", "ViTEncoderBlock"},
    .module = VIT_MODULE,
    .parse = parse,
};
