/* The model graph: layer shapes, the parameter arena, forward and backward through the
 * backend table. See model.h. */
#include "worker/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "worker/preprocess.h"

void mw_model_init(mw_model *m, int in_h, int in_w, int in_c)
{
    memset(m, 0, sizeof *m);
    m->in_h = in_h, m->in_w = in_w, m->in_c = in_c;
    snprintf(m->name, sizeof m->name, "sequential");
    mw_arena_init(&m->params);
}

void mw_model_free(mw_model *m)
{
    free(m->layers);
    free(m->source);
    mw_preprocess_close(&m->pre);
    free(m->next_in);
    mw_arena_free(&m->params);
    memset(m, 0, sizeof *m);
}

static size_t out_count(const mw_layer *l)
{
    return (size_t)l->out_h * l->out_w * l->out_c;
}

/* Append a layer of Keras class cls whose input is the current output shape;
 * NULL on OOM. An empty name gets Keras' automatic one: auto_base, then
 * auto_base_1, ... counted over the shown layers of the same class. */
static mw_layer *push(mw_model *m, mw_layer_kind kind, const char *name, const char *cls,
                      const char *auto_base)
{
    if (m->finalized) {
        mw_err(MW_EINTERNAL, "model: layer added after finalize");
        return NULL;
    }
    if (m->nlayers == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        mw_layer *p = realloc(m->layers, sizeof *p * cap);
        if (!p) {
            mw_err(MW_ENOMEM, "model: out of memory");
            return NULL;
        }
        m->layers = p, m->cap = cap;
    }
    mw_layer *l = &m->layers[m->nlayers];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->cls = cls;
    if (m->next_nin > 0) {
        l->nin = m->next_nin;
        memcpy(l->in, m->next_in, (size_t)l->nin * sizeof *l->in);
        m->next_nin = 0;
    } else {
        l->nin = 1;
        l->in[0] = m->nlayers - 1;
    }
    if (l->in[0] < 0) {
        l->in_h = m->in_h, l->in_w = m->in_w, l->in_c = m->in_c;
        l->flat = m->flat_input;
    } else {
        const mw_layer *p = &m->layers[l->in[0]];
        l->in_h = p->out_h, l->in_w = p->out_w, l->in_c = p->out_c;
        l->flat = p->flat;
    }
    if (name && *name) {
        snprintf(l->name, sizeof l->name, "%s", name);
    } else { /* Keras: base, base_1, base_2, ... counted per class */
        int same = 0;
        for (int i = 0; i < m->nlayers; i++)
            if (!m->layers[i].folded && strcmp(m->layers[i].cls, cls) == 0)
                same++;
        if (same == 0)
            snprintf(l->name, sizeof l->name, "%s", auto_base);
        else
            snprintf(l->name, sizeof l->name, "%s_%d", auto_base, same);
    }
    m->nlayers++;
    return l;
}

static mw_status reject(mw_model *m, mw_status s)
{
    m->nlayers--;
    return s;
}

mw_status mw_model_set_inputs(mw_model *m, const int *in, int nin)
{
    if (nin < 1 || nin > MW_MAX_INPUTS)
        return mw_err(MW_EMODEL, "a layer with %d inputs: expected 1 to %d", nin, MW_MAX_INPUTS);
    for (int j = 0; j < nin; j++)
        if (in[j] < -1 || in[j] >= m->nlayers)
            return mw_err(MW_EINTERNAL,
                          "model: input %d of the next layer is not an earlier "
                          "layer",
                          in[j]);
    if (!m->next_in && !(m->next_in = malloc(MW_MAX_INPUTS * sizeof *m->next_in)))
        return mw_err(MW_ENOMEM, "model: out of memory");
    memcpy(m->next_in, in, (size_t)nin * sizeof *in);
    m->next_nin = nin;
    return MW_OK;
}

mw_status mw_model_add_conv2d(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                              int sw, int same, int use_bias)
{
    mw_layer *l = push(m, MW_LAYER_CONV2D, name, "Conv2D", "conv2d");
    if (!l)
        return mw_err_status();
    if (filters <= 0 || kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (Conv2D): filters %d, kernel %dx%d, strides %dx%d: "
                                "expected positive values",
                                l->name, filters, kh, kw, sh, sw));
    if (mw_conv2d_geom_init(&l->conv, l->in_h, l->in_w, l->in_c, filters, kh, kw, sh, sw, same) !=
        0)
        return reject(m,
                      mw_err(MW_EMODEL,
                             "layer '%s' (Conv2D): a %dx%d kernel with padding '%s' does not "
                             "fit its %dx%dx%d input",
                             l->name, kh, kw, same ? "same" : "valid", l->in_h, l->in_w, l->in_c));
    l->out_h = l->conv.OH, l->out_w = l->conv.OW, l->out_c = filters;
    l->same = same;
    l->flat = 0;
    l->w_count = (size_t)kh * kw * l->in_c * filters;
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)filters : 0;
    l->fan_in = kh * kw * l->in_c, l->fan_out = kh * kw * filters;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

mw_status mw_model_add_maxpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same)
{
    mw_layer *l = push(m, MW_LAYER_MAXPOOL, name, "MaxPooling2D", "max_pooling2d");
    if (!l)
        return mw_err_status();
    if (mw_pool_geom_init(&l->pool, l->in_h, l->in_w, l->in_c, ph, pw, sh, sw, same) != 0)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (MaxPooling2D): pool %dx%d, strides %dx%d, padding "
                                "'%s' does not fit its %dx%dx%d input",
                                l->name, ph, pw, sh, sw, same ? "same" : "valid", l->in_h, l->in_w,
                                l->in_c));
    l->out_h = l->pool.OH, l->out_w = l->pool.OW, l->out_c = l->in_c;
    l->same = same;
    l->flat = 0;
    return MW_OK;
}

mw_status mw_model_add_flatten(mw_model *m, const char *name)
{
    mw_layer *l = push(m, MW_LAYER_FLATTEN, name, "Flatten", "flatten");
    if (!l)
        return mw_err_status();
    l->out_h = 1, l->out_w = 1, l->out_c = l->in_h * l->in_w * l->in_c;
    l->in_place = 1;
    l->flat = 1;
    return MW_OK;
}

mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias)
{
    mw_layer *l = push(m, MW_LAYER_DENSE, name, "Dense", "dense");
    if (!l)
        return mw_err_status();
    if (units <= 0)
        return reject(
            m, mw_err(MW_EMODEL, "layer '%s' (Dense): units %d: expected > 0", l->name, units));
    if (l->in_h != 1 || l->in_w != 1)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (Dense): input is %dx%dx%d; Dense needs a flat "
                                "input (add a Flatten layer before it)",
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

/* A parameter-free layer that keeps its input's shape and runs in place. */
static mw_layer *push_same(mw_model *m, mw_layer_kind kind, const char *name, const char *cls,
                           const char *auto_base)
{
    mw_layer *l = push(m, kind, name, cls, auto_base);
    if (l) {
        l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
        l->in_place = 1;
    }
    return l;
}

mw_status mw_model_add_relu(mw_model *m, const char *name, int folded)
{
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/relu", m->layers[m->nlayers - 1].name);
    mw_layer *l = push_same(m, MW_LAYER_RELU, folded ? nm : name, "ReLU", "re_lu");
    if (!l)
        return mw_err_status();
    l->folded = folded;
    return MW_OK;
}

mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate)
{
    mw_layer *l = push_same(m, MW_LAYER_DROPOUT, name, "Dropout", "dropout");
    if (!l)
        return mw_err_status();
    if (!(rate >= 0.0f && rate < 1.0f))
        return reject(m, mw_err(MW_EMODEL, "layer '%s' (Dropout): rate %g: expected 0 <= rate < 1",
                                l->name, (double)rate));
    l->rate = rate;
    return MW_OK;
}

mw_status mw_model_add_activation(mw_model *m, const char *name, mw_activation act)
{
    mw_layer *l = push_same(m, act == MW_ACT_RELU ? MW_LAYER_RELU : MW_LAYER_IDENTITY, name,
                            "Activation", "activation");
    if (!l)
        return mw_err_status();
    l->softmax = act == MW_ACT_SOFTMAX;
    return MW_OK;
}

mw_status mw_model_add_softmax(mw_model *m, const char *name, int folded)
{
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/softmax", m->layers[m->nlayers - 1].name);
    mw_layer *l = push_same(m, MW_LAYER_IDENTITY, folded ? nm : name, "Softmax", "softmax");
    if (!l)
        return mw_err_status();
    l->softmax = 1;
    l->folded = folded;
    return MW_OK;
}

/* The shape of layer idx's output (-1: the model's input). */
static void shape_of(const mw_model *m, int idx, int s[3])
{
    if (idx < 0) {
        s[0] = m->in_h, s[1] = m->in_w, s[2] = m->in_c;
        return;
    }
    const mw_layer *p = &m->layers[idx];
    s[0] = p->out_h, s[1] = p->out_w, s[2] = p->out_c;
}

/* The Keras layer behind output idx: a folded activation's own layer. */
static const char *producer_name(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    return idx < 0 ? (m->input_name[0] ? m->input_name : "the model input") : m->layers[idx].name;
}

mw_status mw_model_add_batchnorm(mw_model *m, const char *name, float momentum, float epsilon,
                                 int center, int scale, int sync)
{
    mw_layer *l = push(m, MW_LAYER_BATCHNORM, name, "BatchNormalization", "batch_normalization");
    if (!l)
        return mw_err_status();
    if (!(momentum >= 0.0f && momentum <= 1.0f) || !(epsilon > 0.0f))
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (BatchNormalization): momentum %g, epsilon %g: "
                                "expected 0 <= momentum <= 1 and epsilon > 0",
                                l->name, (double)momentum, (double)epsilon));
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->momentum = momentum, l->epsilon = epsilon, l->sync = sync;
    l->w_count = scale ? (size_t)l->in_c : 0;
    l->has_bias = center;
    l->b_count = center ? (size_t)l->in_c : 0;
    l->s_count = 2 * (size_t)l->in_c;
    l->fan_in = l->fan_out = l->in_c;
    l->kernel_init.kind = MW_INIT_ONES, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static mw_status pool_layer(mw_model *m, mw_layer *l, int ph, int pw, int sh, int sw, int same)
{
    if (mw_pool_geom_init(&l->pool, l->in_h, l->in_w, l->in_c, ph, pw, sh, sw, same) != 0)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (%s): pool %dx%d, strides %dx%d, padding '%s' does "
                                "not fit its %dx%dx%d input",
                                l->name, l->cls, ph, pw, sh, sw, same ? "same" : "valid", l->in_h,
                                l->in_w, l->in_c));
    l->out_h = l->pool.OH, l->out_w = l->pool.OW, l->out_c = l->in_c;
    l->same = same;
    l->flat = 0;
    return MW_OK;
}

mw_status mw_model_add_avgpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same)
{
    mw_layer *l = push(m, MW_LAYER_AVGPOOL, name, "AveragePooling2D", "average_pooling2d");
    return l ? pool_layer(m, l, ph, pw, sh, sw, same) : mw_err_status();
}

mw_status mw_model_add_global_pool(mw_model *m, const char *name, int max)
{
    mw_layer *l =
        max ? push(m, MW_LAYER_MAXPOOL, name, "GlobalMaxPooling2D", "global_max_pooling2d")
            : push(m, MW_LAYER_AVGPOOL, name, "GlobalAveragePooling2D", "global_average_pooling2d");
    if (!l)
        return mw_err_status();
    if (l->flat)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (%s): input is flat (None, %d); expected "
                                "(None, height, width, channels)",
                                l->name, l->cls, l->in_c));
    MW_TRY(pool_layer(m, l, l->in_h, l->in_w, 1, 1, 0));
    l->global = 1;
    l->flat = 1;
    return MW_OK;
}

mw_status mw_model_add_zeropad(mw_model *m, const char *name, int top, int bottom, int left,
                               int right)
{
    mw_layer *l = push(m, MW_LAYER_ZEROPAD, name, "ZeroPadding2D", "zero_padding2d");
    if (!l)
        return mw_err_status();
    if (top < 0 || bottom < 0 || left < 0 || right < 0 || l->flat)
        return reject(m, mw_err(MW_EMODEL,
                                "layer '%s' (ZeroPadding2D): padding %d,%d,%d,%d on a %s input: "
                                "expected padding >= 0 on (None, height, width, channels)",
                                l->name, top, bottom, left, right, l->flat ? "flat" : "4-D"));
    l->pad[0] = top, l->pad[1] = bottom, l->pad[2] = left, l->pad[3] = right;
    l->out_h = l->in_h + top + bottom, l->out_w = l->in_w + left + right, l->out_c = l->in_c;
    return MW_OK;
}

/* A merge of l's inputs: every input's shape equal to the first's, or (concat) the same
 * height and width; out_c gets the channel total. */
static mw_status merge_layer(mw_model *m, mw_layer *l, int concat)
{
    int s0[3], s[3];
    shape_of(m, l->in[0], s0);
    l->out_h = s0[0], l->out_w = s0[1], l->out_c = 0;
    for (int j = 0; j < l->nin; j++) {
        shape_of(m, l->in[j], s);
        int flat = l->in[j] < 0 ? m->flat_input : m->layers[l->in[j]].flat;
        if (s[0] != s0[0] || s[1] != s0[1] || (!concat && s[2] != s0[2]) || flat != l->flat)
            return reject(m, mw_err(MW_EMODEL,
                                    "layer '%s' (%s): input %d ('%s') is %dx%dx%d but input 0 "
                                    "('%s') is %dx%dx%d; expected %s",
                                    l->name, l->cls, j, producer_name(m, l->in[j]), s[0], s[1],
                                    s[2], producer_name(m, l->in[0]), s0[0], s0[1], s0[2],
                                    concat ? "the same height and width" : "equal shapes"));
        l->out_c += s[2];
    }
    if (!concat)
        l->out_c = s0[2];
    return MW_OK;
}

mw_status mw_model_add_add(mw_model *m, const char *name)
{
    mw_layer *l = push(m, MW_LAYER_ADD, name, "Add", "add");
    return l ? merge_layer(m, l, 0) : mw_err_status();
}

mw_status mw_model_add_multiply(mw_model *m, const char *name)
{
    mw_layer *l = push(m, MW_LAYER_MULTIPLY, name, "Multiply", "multiply");
    if (!l)
        return mw_err_status();
    if (l->nin != 2)
        return reject(m, mw_err(MW_EUNSUPPORTED,
                                "layer '%s' (Multiply): %d inputs; supported: exactly 2", l->name,
                                l->nin));
    return merge_layer(m, l, 0);
}

mw_status mw_model_add_concat(mw_model *m, const char *name)
{
    mw_layer *l = push(m, MW_LAYER_CONCAT, name, "Concatenate", "concatenate");
    return l ? merge_layer(m, l, 1) : mw_err_status();
}

mw_status mw_model_add_act(mw_model *m, const char *name, mw_activation act, float alpha,
                           int folded)
{
    static const char *const names[] = {"linear", "relu", "softmax", "sigmoid",   "tanh",
                                        "gelu",   "silu", "elu",     "leaky_relu"};
    if (act == MW_ACT_RELU)
        return folded ? mw_model_add_relu(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_SOFTMAX)
        return folded ? mw_model_add_softmax(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_LINEAR)
        return folded ? MW_OK : mw_model_add_activation(m, name, act);
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/%s", m->layers[m->nlayers - 1].name, names[act]);
    mw_layer *l = push(m, MW_LAYER_ACT, folded ? nm : name, "Activation", "activation");
    if (!l)
        return mw_err_status();
    static const mw_act_kind kinds[] = {0,
                                        0,
                                        0,
                                        MW_ACTK_SIGMOID,
                                        MW_ACTK_TANH,
                                        MW_ACTK_GELU,
                                        MW_ACTK_SILU,
                                        MW_ACTK_ELU,
                                        MW_ACTK_LEAKY_RELU};
    l->act = kinds[act];
    l->alpha = alpha;
    l->folded = folded;
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    return MW_OK;
}

static mw_layer *last_with_weights(mw_model *m)
{
    if (m->nlayers == 0 || m->finalized || !m->layers[m->nlayers - 1].w_count) {
        mw_err(MW_EINTERNAL, "model: initializer or regularizer set on a layer without weights");
        return NULL;
    }
    return &m->layers[m->nlayers - 1];
}

mw_status mw_model_set_init(mw_model *m, const mw_init *kernel, const mw_init *bias)
{
    mw_layer *l = last_with_weights(m);
    if (!l)
        return MW_EINTERNAL;
    if (kernel)
        l->kernel_init = *kernel;
    if (bias)
        l->bias_init = *bias;
    return MW_OK;
}

mw_status mw_model_set_regularizer(mw_model *m, const mw_regularizer *kernel,
                                   const mw_regularizer *bias)
{
    mw_layer *l = last_with_weights(m);
    if (!l)
        return MW_EINTERNAL;
    if (kernel)
        l->kernel_reg = *kernel;
    if (bias)
        l->bias_reg = *bias;
    return MW_OK;
}

/* ReLU then MaxPool equals MaxPool then ReLU (ReLU is monotonic, so it
 * commutes with max), and the gradients agree too: where a window's max is
 * <= 0 both give 0, elsewhere both route dy to the same first maximum. After
 * the pool the ReLU touches a quarter of the values, forward and backward. */
/* How many layers read the output of layer idx (-1: the model input). */
static int consumers(const mw_model *m, int idx)
{
    int n = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int j = 0; j < m->layers[i].nin; j++)
            n += m->layers[i].in[j] == idx;
    return n;
}

static void pool_before_relu(mw_model *m)
{
    for (int i = 0; i + 1 < m->nlayers; i++) {
        mw_layer *r = &m->layers[i], *p = &m->layers[i + 1];
        if (r->kind != MW_LAYER_RELU || !r->folded || p->kind != MW_LAYER_MAXPOOL ||
            p->in[0] != i || consumers(m, i) != 1)
            continue;
        mw_layer relu = *r, pool = *p;
        pool.in_h = relu.in_h, pool.in_w = relu.in_w, pool.in_c = relu.in_c;
        pool.in[0] = relu.in[0];
        relu.in[0] = i;
        relu.in_h = relu.out_h = pool.out_h;
        relu.in_w = relu.out_w = pool.out_w;
        relu.in_c = relu.out_c = pool.out_c;
        relu.flat = pool.flat;
        *r = pool, *p = relu;
        i++;
    }
}

/* Layers that change their input in place (ReLU, Dropout) may do so only when no other
 * layer reads it, and not over the output of a layer whose backward needs it (ACT,
 * SOFTMAX: found through the aliases). Flatten and identities alias only a sole consumer's
 * input. A softmax before the end becomes a computed layer. */
static void plan_in_place(mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        if (l->softmax && i + 1 < m->nlayers)
            l->kind = MW_LAYER_SOFTMAX, l->in_place = 0;
        if (!l->in_place)
            continue;
        if (consumers(m, l->in[0]) != 1) {
            l->in_place = 0;
            continue;
        }
        if (l->kind != MW_LAYER_RELU && l->kind != MW_LAYER_DROPOUT)
            continue;
        int p = l->in[0];
        while (p >= 0 && m->layers[p].in_place)
            p = m->layers[p].in[0];
        if (p >= 0 && (m->layers[p].kind == MW_LAYER_ACT || m->layers[p].kind == MW_LAYER_SOFTMAX))
            l->in_place = 0;
    }
}

static const char *const policy_names[] = {"float32", "mixed_bfloat16", "mixed_float16"};

const char *mw_policy_name(mw_policy p)
{
    return (unsigned)p < 3 ? policy_names[p] : "?";
}

int mw_policy_parse(const char *name, mw_policy *p)
{
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, policy_names[i])) {
            *p = (mw_policy)i;
            return 0;
        }
    return -1;
}

void mw_model_set_policy(mw_model *m, mw_policy p)
{
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i].policy = p;
}

mw_policy mw_model_policy(const mw_model *m)
{
    mw_policy p = MW_POLICY_FLOAT32;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].policy == MW_POLICY_MIXED_FLOAT16)
            return MW_POLICY_MIXED_FLOAT16;
        else if (m->layers[i].policy == MW_POLICY_MIXED_BFLOAT16)
            p = MW_POLICY_MIXED_BFLOAT16;
    return p;
}

/* Mixed precision rounds a tensor where it is made (kernels/cast.h), so a 16-bit layer must
 * read 16-bit tensors: the output of a 16-bit layer, or the model's input when every layer
 * that reads it is 16-bit (it is rounded once per step). Keras casts a float32 tensor at each
 * 16-bit consumer instead; the one layout that needs it, a float32 layer between 16-bit ones,
 * is refused here with the way out. */
static mw_status check_policies(const mw_model *m)
{
    int in16 = -1; /* the input's consumers: -1 none yet, 0 float32, 1 16-bit */
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        const int half = l->policy != MW_POLICY_FLOAT32;
        for (int j = 0; j < l->nin; j++) {
            const int t = l->in[j];
            if (t < 0 && in16 >= 0 && in16 != half)
                return mw_err(MW_EUNSUPPORTED,
                              "layer '%s' (dtype %s): the model's input also feeds a layer of "
                              "another dtype policy; expected every layer that reads the input "
                              "to have the same policy",
                              l->name, mw_policy_name(l->policy));
            if (t < 0)
                in16 = half;
            else if (half && m->layers[t].policy != l->policy) {
                /* a folded activation is named "layer/relu": the Keras layer is the part
                 * before the slash */
                const char *pn = m->layers[t].name;
                const int pl = (int)strcspn(pn, "/");
                return mw_err(MW_EUNSUPPORTED,
                              "layer '%s' (dtype %s) reads the output of layer '%.*s' (dtype "
                              "%s); a 16-bit layer must read a layer of its own policy (or "
                              "the model's input): give '%.*s' the policy %s, or make the "
                              "float32 layers the last ones",
                              l->name, mw_policy_name(l->policy), pl, pn,
                              mw_policy_name(m->layers[t].policy), pl, pn,
                              mw_policy_name(l->policy));
            }
        }
    }
    return MW_OK;
}

/* A layer whose forward output holds 16-bit values when its inputs do: it selects, copies or
 * zeroes, never computes a new value. */
static int exact_fwd(const mw_layer *l)
{
    return l->kind == MW_LAYER_RELU || l->kind == MW_LAYER_MAXPOOL || l->kind == MW_LAYER_FLATTEN ||
           l->kind == MW_LAYER_IDENTITY || l->kind == MW_LAYER_ZEROPAD ||
           l->kind == MW_LAYER_CONCAT;
}

/* The same of its backward: dx holds 16-bit values when dy does (max pooling only when its
 * windows do not overlap: overlapping ones add). */
static int exact_bwd(const mw_layer *l)
{
    if (l->kind == MW_LAYER_MAXPOOL)
        return l->pool.SH >= l->pool.PH && l->pool.SW >= l->pool.PW;
    return l->kind == MW_LAYER_RELU || l->kind == MW_LAYER_FLATTEN ||
           l->kind == MW_LAYER_IDENTITY || l->kind == MW_LAYER_ZEROPAD ||
           l->kind == MW_LAYER_CONCAT;
}

/* round_out / round_grad of every layer (kernels/cast.h's roundings, only where needed). A
 * tensor's gradient is exact when every consumer's backward is exact, from a 16-bit dy,
 * and there is one (several add up); the last layer's comes from the loss. */
static void plan_rounding(mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        const int half = l->policy != MW_POLICY_FLOAT32;
        l->round_out = half && !exact_fwd(l);
        int exact = i + 1 < m->nlayers && consumers(m, i) == 1;
        for (int c = i + 1; c < m->nlayers && exact; c++)
            for (int j = 0; j < m->layers[c].nin; j++)
                if (m->layers[c].in[j] == i)
                    exact = exact_bwd(&m->layers[c]) && m->layers[c].policy == l->policy;
        l->round_grad = half && !exact;
    }
}

mw_status mw_model_finalize(mw_model *m, size_t pad_multiple)
{
    if (m->nlayers == 0)
        return mw_err(MW_EMODEL, "model has no layers");
    for (int i = 0; i + 1 < m->nlayers; i++)
        if (consumers(m, i) == 0)
            return mw_err(MW_EMODEL,
                          "layer '%s': its output is not used; expected every layer to lead to "
                          "the model's output (the last layer)",
                          m->layers[i].name);
    if (consumers(m, m->nlayers - 1) != 0)
        return mw_err(MW_EINTERNAL, "model: the last layer feeds another layer");
    MW_TRY(check_policies(m));
    pool_before_relu(m);
    plan_in_place(m);
    plan_rounding(m);
    const mw_layer *last = &m->layers[m->nlayers - 1];
    if (last->out_h != 1 || last->out_w != 1)
        return mw_err(MW_EMODEL,
                      "model output is %dx%dx%d after layer '%s'; the classifier needs a flat "
                      "output (end with Flatten and Dense)",
                      last->out_h, last->out_w, last->out_c, last->name);
    m->nclasses = last->out_c;
    mw_arena_init(&m->params);
    m->nparams = 0;
    m->nstate = 0;
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        if (l->w_count) {
            l->w_off = mw_arena_reserve(&m->params, l->w_count);
            m->nparams += l->w_count;
        }
        if (l->b_count) {
            l->b_off = mw_arena_reserve(&m->params, l->b_count);
            m->nparams += l->b_count;
        }
        if (l->s_count) {
            l->s_off = mw_arena_reserve(&m->params, l->s_count);
            m->nparams += l->s_count;
            m->nstate += l->s_count;
        }
    }
    mw_arena_pad_to(&m->params, pad_multiple);
    MW_TRY(mw_arena_alloc(&m->params));
    m->finalized = 1;
    return MW_OK;
}

/* Standard normal truncated to |z| < 2 (Keras' truncated_normal: redraw). */
static float truncated_z(mw_rng *r)
{
    float z;
    do
        z = mw_rng_normal(r);
    while (fabsf(z) >= 2.0f);
    return z;
}

static void init_tensor(float *p, size_t count, const mw_init *in, int fan_in, int fan_out,
                        mw_rng *r)
{
    const mw_init_kind kind = in->kind;
    double limit, stddev, n;
    switch (kind) {
    case MW_INIT_ZEROS:
        memset(p, 0, count * sizeof *p);
        return;
    case MW_INIT_ONES:
        for (size_t i = 0; i < count; i++)
            p[i] = 1.0f;
        return;
    case MW_INIT_GLOROT_UNIFORM:
    case MW_INIT_HE_UNIFORM:
        limit =
            kind == MW_INIT_GLOROT_UNIFORM ? sqrt(6.0 / (fan_in + fan_out)) : sqrt(6.0 / fan_in);
        for (size_t i = 0; i < count; i++)
            p[i] = (float)((2.0 * mw_rng_uniform(r) - 1.0) * limit);
        return;
    case MW_INIT_GLOROT_NORMAL:
    case MW_INIT_HE_NORMAL:
        /* Keras: truncated normal (|z| < 2), stddev / 0.8796 to keep the variance */
        stddev =
            (kind == MW_INIT_GLOROT_NORMAL ? sqrt(2.0 / (fan_in + fan_out)) : sqrt(2.0 / fan_in)) /
            0.87962566103423978;
        for (size_t i = 0; i < count; i++) {
            float z = truncated_z(r);
            p[i] = (float)(z * stddev);
        }
        return;
    case MW_INIT_VARIANCE_SCALING:
        /* Keras: n = fan_in, fan_out or their mean, at least 1 */
        n = in->mode == MW_FAN_IN    ? fan_in
            : in->mode == MW_FAN_OUT ? fan_out
                                     : (fan_in + fan_out) / 2.0;
        n = n < 1.0 ? 1.0 : n;
        if (in->dist == MW_DIST_UNIFORM) {
            limit = sqrt(3.0 * in->scale / n);
            for (size_t i = 0; i < count; i++)
                p[i] = (float)((2.0 * mw_rng_uniform(r) - 1.0) * limit);
        } else if (in->dist == MW_DIST_UNTRUNCATED_NORMAL) {
            stddev = sqrt(in->scale / n);
            for (size_t i = 0; i < count; i++)
                p[i] = (float)(mw_rng_normal(r) * stddev);
        } else {
            stddev = sqrt(in->scale / n) / 0.87962566103423978;
            for (size_t i = 0; i < count; i++)
                p[i] = (float)(truncated_z(r) * stddev);
        }
        return;
    case MW_INIT_RANDOM_UNIFORM:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + (in->b - in->a) * mw_rng_uniform(r));
        return;
    case MW_INIT_RANDOM_NORMAL:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + in->b * mw_rng_normal(r));
        return;
    case MW_INIT_TRUNCATED_NORMAL:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)(in->a + in->b * truncated_z(r));
        return;
    case MW_INIT_CONSTANT:
        for (size_t i = 0; i < count; i++)
            p[i] = (float)in->a;
        return;
    }
}

void mw_model_init_params(mw_model *m, uint64_t seed)
{
    memset(m->params.data, 0, m->params.count * sizeof(float));
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        mw_rng r;
        mw_rng_seed(&r, seed, 1000 + (uint64_t)i);
        if (l->w_count)
            init_tensor(m->params.data + l->w_off, l->w_count, &l->kernel_init, l->fan_in,
                        l->fan_out, &r);
        if (l->b_count) /* Keras: a 1-D shape (n) has fan_in = fan_out = n */
            init_tensor(m->params.data + l->b_off, l->b_count, &l->bias_init, (int)l->b_count,
                        (int)l->b_count, &r);
        for (size_t c = 0; c < l->s_count / 2; c++) /* moving mean 0, moving variance 1 */
            m->params.data[l->s_off + l->s_count / 2 + c] = 1.0f;
    }
}

/* The regularizer of tensor b (0: kernel, 1: bias) of l, or NULL when it has none. */
static const mw_regularizer *regularizer(const mw_layer *l, int b)
{
    const mw_regularizer *rg = b ? &l->bias_reg : &l->kernel_reg;
    size_t count = b ? l->b_count : l->w_count;
    return count == 0 || (rg->l1 == 0.0 && rg->l2 == 0.0) ? NULL : rg;
}

int mw_model_has_regularizers(const mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (regularizer(&m->layers[i], 0) || regularizer(&m->layers[i], 1))
            return 1;
    return 0;
}

int mw_model_regularize(const mw_model *m, const mw_kernels *t, const mw_kctx *k,
                        const float *params, float *grads, double *acc, float scale)
{
    int any = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        for (int b = 0; b < 2; b++) {
            const mw_regularizer *rg = regularizer(l, b);
            if (!rg)
                continue;
            size_t off = b ? l->b_off : l->w_off, count = b ? l->b_count : l->w_count;
            t->regularize(k, grads ? grads + off : NULL, acc, params + off, count, rg->l1, rg->l2,
                          scale);
            any = 1;
        }
    }
    return any;
}

double mw_model_regularization(const mw_model *m, float *grads, float scale)
{
    mw_kernels ref;
    mw_kernels_init_ref(&ref);
    mw_kctx k = {.nthreads = 1};
    double total = 0.0;
    mw_model_regularize(m, &ref, &k, m->params.data, grads, &total, scale);
    return total;
}

/* ---- workspace ---- */

void mw_model_ws_init(mw_model_ws *ws)
{
    memset(ws, 0, sizeof *ws);
}

void mw_model_ws_free(mw_model_ws *ws)
{
    free(ws->act);
    free(ws->grad);
    free(ws->argmax);
    free(ws->mask);
    free(ws->stats);
    if (ws->block_free)
        ws->block_free(ws->block);
    else
        free(ws->block);
    memset(ws, 0, sizeof *ws);
}

static size_t up64(size_t nbytes)
{
    return (nbytes + 63) / 64 * 64;
}

mw_status mw_model_ws_alloc(mw_model_ws *ws, const mw_model *m, int max_n)
{
    return mw_model_ws_alloc_with(ws, m, max_n, NULL, NULL);
}

/* Where each workspace buffer sits in the one block: byte offsets from its start. */
typedef struct {
    size_t *act, *grad; /* L + 1 each: the input and each layer's output */
    size_t *arg;        /* L: a maxpool's argmax or a dropout's mask (a layer has at most one) */
    size_t prob, loss, labels, scratch;
    size_t params16;      /* a mixed policy's rounded weights (SIZE_MAX: none) */
    size_t scratch_count; /* floats of conv2d scratch, the most any layer needs */
    size_t nbytes;        /* the block's size */
} ws_plan;

static void plan_free(ws_plan *p)
{
    free(p->act), free(p->grad), free(p->arg);
}

/* Record v at a[i] unless a is NULL (a plan that only counts bytes). */
static void put(size_t *a, int i, size_t v)
{
    if (a)
        a[i] = v;
}

/* Plan offsets in one block: act[0], then each non-aliased output and its gradient, argmax
 * and dropout mask buffers, prob, loss, labels, scratch (only when with_scratch: a device
 * block has none). With p's offset tables NULL it only counts: p->nbytes and
 * p->scratch_count are the same either way, so the estimate (mw_model_ws_nbytes) and the
 * allocation cannot drift apart. */
static void plan_ws(ws_plan *p, const mw_model *m, size_t n, int with_scratch)
{
    const int L = m->nlayers;
    size_t off = 0, in0 = n * m->in_h * m->in_w * m->in_c * sizeof(float);
    put(p->act, 0, off), off += up64(in0);
    put(p->grad, 0, off), off += up64(in0);
    size_t scratch = 0;
    for (int i = 0; i < L; i++) {
        const mw_layer *l = &m->layers[i];
        size_t bytes = n * out_count(l) * sizeof(float);
        if (l->in_place) {
            put(p->act, i + 1, p->act ? p->act[l->in[0] + 1] : 0);
            put(p->grad, i + 1, p->grad ? p->grad[l->in[0] + 1] : 0);
        } else {
            put(p->act, i + 1, off), off += up64(bytes);
            put(p->grad, i + 1, off), off += up64(bytes);
        }
        if (l->kind == MW_LAYER_MAXPOOL)
            put(p->arg, i, off), off += up64(n * out_count(l) * sizeof(int32_t));
        if (l->kind == MW_LAYER_DROPOUT)
            put(p->arg, i, off), off += up64(n * out_count(l) * sizeof(float));
        if (l->kind == MW_LAYER_BATCHNORM)
            put(p->arg, i, off), off += up64(3 * (size_t)l->out_c * sizeof(float));
        if (l->kind == MW_LAYER_CONV2D) {
            size_t s = mw_conv2d_ws_count(&l->conv, (int)n);
            scratch = s > scratch ? s : scratch;
        }
    }
    p->prob = off;
    off += up64(n * m->nclasses * sizeof(float));
    p->loss = off;
    off += up64(n * sizeof(float));
    p->labels = off;
    off += up64(n * sizeof(int32_t));
    p->params16 = SIZE_MAX;
    if (mw_model_policy(m) != MW_POLICY_FLOAT32) {
        p->params16 = off;
        off += up64(m->params.count * sizeof(float));
    }
    p->scratch = off;
    if (with_scratch)
        off += up64(scratch * sizeof(float));
    p->scratch_count = scratch;
    p->nbytes = off;
}

/* The offset tables of a plan; 0 when out of memory. */
static int plan_alloc(ws_plan *p, int L)
{
    memset(p, 0, sizeof *p);
    p->act = calloc((size_t)L + 1, sizeof *p->act);
    p->grad = calloc((size_t)L + 1, sizeof *p->grad);
    p->arg = calloc((size_t)L > 0 ? (size_t)L : 1, sizeof *p->arg);
    if (!p->act || !p->grad || !p->arg) {
        plan_free(p);
        return 0;
    }
    return 1;
}

size_t mw_model_ws_nbytes(const mw_model *m, int max_n)
{
    ws_plan p;
    memset(&p, 0, sizeof p); /* no tables: count only */
    plan_ws(&p, m, (size_t)(max_n > 0 ? max_n : 1), 1);
    return p.nbytes;
}

/* Point ws's buffers into its block as planned. */
static void carve_ws(mw_model_ws *ws, const mw_model *m, const ws_plan *p, int with_scratch)
{
    char *base = ws->block;
    for (int i = 0; i <= m->nlayers; i++) {
        ws->act[i] = (float *)(base + p->act[i]);
        ws->grad[i] = (float *)(base + p->grad[i]);
    }
    for (int i = 0; i < m->nlayers; i++) {
        ws->argmax[i] =
            m->layers[i].kind == MW_LAYER_MAXPOOL ? (int32_t *)(base + p->arg[i]) : NULL;
        ws->mask[i] = m->layers[i].kind == MW_LAYER_DROPOUT ? (float *)(base + p->arg[i]) : NULL;
        ws->stats[i] = m->layers[i].kind == MW_LAYER_BATCHNORM ? (float *)(base + p->arg[i]) : NULL;
    }
    ws->prob = (float *)(base + p->prob);
    ws->loss = (float *)(base + p->loss);
    ws->labels = (int32_t *)(base + p->labels);
    ws->params16 = p->params16 == SIZE_MAX ? NULL : (float *)(base + p->params16);
    ws->scratch = with_scratch ? (float *)(base + p->scratch) : NULL;
    ws->scratch_count = p->scratch_count;
}

mw_status mw_model_ws_alloc_with(mw_model_ws *ws, const mw_model *m, int max_n,
                                 mw_status (*alloc_fn)(void **p, size_t nbytes),
                                 void (*free_fn)(void *p))
{
    mw_model_ws_free(ws);
    const int L = m->nlayers;
    const size_t n = (size_t)(max_n > 0 ? max_n : 1);
    ws->max_n = (int)n;
    ws->act = calloc((size_t)L + 1, sizeof *ws->act);
    ws->grad = calloc((size_t)L + 1, sizeof *ws->grad);
    ws->argmax = calloc((size_t)L, sizeof *ws->argmax);
    ws->mask = calloc((size_t)L, sizeof *ws->mask);
    ws->stats = calloc((size_t)L, sizeof *ws->stats);
    if (!ws->act || !ws->grad || !ws->argmax || !ws->mask || !ws->stats)
        goto oom;

    ws_plan plan;
    if (!plan_alloc(&plan, L))
        goto oom;
    plan_ws(&plan, m, n, !alloc_fn);
    if (alloc_fn) {
        void *blk = NULL;
        mw_status rc = alloc_fn(&blk, plan.nbytes);
        if (rc != MW_OK) {
            plan_free(&plan);
            mw_model_ws_free(ws);
            return rc;
        }
        ws->block = blk;
        ws->block_free = free_fn;
    } else {
        ws->block = mw_alloc_aligned(plan.nbytes);
    }
    if (!ws->block) {
        plan_free(&plan);
        goto oom;
    }
    carve_ws(ws, m, &plan, !alloc_fn);
    ws->nbytes = plan.nbytes;
    plan_free(&plan);
    return MW_OK;
oom:
    mw_model_ws_free(ws);
    return mw_err(MW_ENOMEM, "model workspace for batch %zu: out of memory", n);
}

/* ---- forward / backward ---- */

/* Floats per example of tensor t (0: the input, t: layer t-1's output). */
static size_t tensor_count(const mw_model *m, int t)
{
    return t == 0 ? (size_t)m->in_h * m->in_w * m->in_c : out_count(&m->layers[t - 1]);
}

static void zero_buf(const mw_kernels *kt, const mw_kctx *k, void *p, size_t nbytes)
{
    if (kt->zero)
        kt->zero(k, p, nbytes);
    else
        memset(p, 0, nbytes);
}

/* y = x through the table (a layer that is not in place but computes nothing). */
static void copy_buf(const mw_kernels *kt, const mw_kctx *k, float *y, const float *x, size_t count)
{
    zero_buf(kt, k, y, count * sizeof *y);
    kt->acc(k, y, x, count);
}

/* The forward of the layers Functional graphs add. */
static void fwd_graph(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                      const mw_model_ws *ws, const float *P, int i, int n)
{
    const mw_layer *l = &m->layers[i];
    const float *x = ws->act[l->in[0] + 1];
    float *y = ws->act[i + 1], *st = ws->stats[i];
    const size_t cnt = (size_t)n * out_count(l), rows = (size_t)n * l->out_h * l->out_w;
    const int C = l->out_c;
    switch (l->kind) {
    case MW_LAYER_BATCHNORM: {
        const float *g = l->w_count ? P + l->w_off : NULL, *b = l->b_count ? P + l->b_off : NULL;
        if (ws->training)
            kt->bn_fwd_train(k, y, st, st + C, st + 2 * C, x, g, b, rows, C, l->epsilon);
        else
            kt->bn_fwd_infer(k, y, x, g, b, P + l->s_off, P + l->s_off + C, rows, C, l->epsilon);
        break;
    }
    case MW_LAYER_AVGPOOL:
        kt->avgpool_fwd(k, y, x, &l->pool, n);
        break;
    case MW_LAYER_ZEROPAD:
        kt->pad2d_fwd(k, y, x, l->in_h, l->in_w, l->in_c, l->pad[0], l->pad[1], l->pad[2],
                      l->pad[3], n);
        break;
    case MW_LAYER_ADD:
        zero_buf(kt, k, y, cnt * sizeof *y);
        for (int j = 0; j < l->nin; j++)
            kt->acc(k, y, ws->act[l->in[j] + 1], cnt);
        break;
    case MW_LAYER_MULTIPLY:
        kt->mul_fwd(k, y, x, ws->act[l->in[1] + 1], cnt);
        break;
    case MW_LAYER_CONCAT:
        for (int j = 0, off = 0; j < l->nin; j++) {
            int cj = (int)tensor_count(m, l->in[j] + 1) / (l->out_h * l->out_w);
            kt->concat_fwd(k, y, ws->act[l->in[j] + 1], rows, cj, C, off);
            off += cj;
        }
        break;
    case MW_LAYER_ACT:
        kt->act_fwd(k, y, x, cnt, l->act, l->alpha);
        break;
    case MW_LAYER_SOFTMAX:
        kt->softmax_fwd(k, y, x, rows, C);
        break;
    default:
        break;
    }
}

/* The cast of a 16-bit policy (kernels/cast.h): round_bf16 or round_f16. */
static mw_round_bf16_fn round_of(const mw_kernels *kt, mw_policy p)
{
    return p == MW_POLICY_MIXED_FLOAT16 ? kt->round_f16 : kt->round_bf16;
}

/* The parameters layer l computes with: its matmul weights rounded to 16 bits under a mixed
 * policy (Keras casts the float32 variable to the compute dtype at use), P else. */
static const float *layer_params(const mw_layer *l, const mw_model_ws *ws, const float *P)
{
    const int matmul = l->kind == MW_LAYER_CONV2D || l->kind == MW_LAYER_DENSE;
    return matmul && l->policy != MW_POLICY_FLOAT32 && ws->params16 ? ws->params16 : P;
}

/* A mixed policy, before a forward from layer 0: the model's input rounded when its
 * consumers compute in 16 bits (mw_model_finalize refused a mix), and the matmul layers'
 * weights rounded into ws->params16. */
static void fwd_casts(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      const float *P, int n)
{
    if (!ws->params16)
        return;
    const mw_policy half = mw_model_policy(m);
    int input16 = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        for (int j = 0; j < l->nin; j++)
            input16 |= l->in[j] < 0 && l->policy != MW_POLICY_FLOAT32;
        if (l->policy == MW_POLICY_FLOAT32 ||
            (l->kind != MW_LAYER_CONV2D && l->kind != MW_LAYER_DENSE))
            continue;
        copy_buf(kt, k, ws->params16 + l->w_off, P + l->w_off, l->w_count);
        round_of(kt, l->policy)(k, ws->params16 + l->w_off, l->w_count);
        if (l->b_count) {
            copy_buf(kt, k, ws->params16 + l->b_off, P + l->b_off, l->b_count);
            round_of(kt, l->policy)(k, ws->params16 + l->b_off, l->b_count);
        }
    }
    if (input16 && n > 0)
        round_of(kt, half)(k, ws->act[0], (size_t)n * tensor_count(m, 0));
}

static void fwd_kind(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                     const float *P, int i, int n)
{
    const mw_layer *l = &m->layers[i];
    float *x = ws->act[l->in[0] + 1], *y = ws->act[i + 1];
    const size_t cnt = (size_t)n * out_count(l);
    switch (l->kind) {
    case MW_LAYER_CONV2D:
        kt->conv2d_fwd(k, y, x, P + l->w_off, l->has_bias ? P + l->b_off : NULL, &l->conv, n);
        break;
    case MW_LAYER_MAXPOOL:
        kt->maxpool_fwd(k, y, ws->argmax[i], x, &l->pool, n);
        break;
    case MW_LAYER_DENSE:
        kt->dense_fwd(k, y, x, P + l->w_off, l->has_bias ? P + l->b_off : NULL, n, l->in_c,
                      l->out_c);
        break;
    case MW_LAYER_RELU:
        kt->relu_fwd(k, y, x, cnt);
        break;
    case MW_LAYER_DROPOUT: /* the layer index keys the mask */
        if (ws->training && l->rate > 0.0f)
            kt->dropout_fwd(k, y, ws->mask[i], x, ws->example_ids, ws->dropout_seed, (uint64_t)i,
                            l->rate, n, out_count(l));
        else if (!l->in_place)
            copy_buf(kt, k, y, x, cnt);
        break;
    case MW_LAYER_FLATTEN:
    case MW_LAYER_IDENTITY:
        if (!l->in_place)
            copy_buf(kt, k, y, x, cnt);
        break;
    default:
        fwd_graph(m, kt, k, ws, P, i, n);
        break;
    }
}

static void fwd_layer(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      const float *P, int i, int n)
{
    const mw_layer *l = &m->layers[i];
    mw_kctx kb = *k;
    kb.bf16 = l->policy == MW_POLICY_MIXED_BFLOAT16; /* its products' operands are 16-bit */
    kb.f16 = l->policy == MW_POLICY_MIXED_FLOAT16;
    fwd_kind(m, kt, &kb, ws, layer_params(l, ws, P), i, n);
    if (l->round_out) /* the layer's output is a 16-bit tensor */
        round_of(kt, l->policy)(k, ws->act[i + 1], (size_t)n * out_count(l));
}

void mw_model_forward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int n, int from, int to)
{
    const float *P = ws->params ? ws->params : m->params.data;
    if (from == 0)
        fwd_casts(m, kt, k, ws, P, n);
    for (int i = from; i < to; i++)
        fwd_layer(m, kt, k, ws, P, i, n);
    if (to == m->nlayers && n > 0)
        kt->xent_fwd(k, ws->loss, ws->prob, ws->act[m->nlayers], ws->labels, n, m->nclasses);
}

void mw_model_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      int n)
{
    mw_model_forward_part(m, kt, k, ws, n, 0, m->nlayers);
}

/* BatchNormalization's backward, and its batch statistics into the moving-statistics
 * gradient slots (scale * n * stat; see model.h), through the table: on the GPU both are
 * device memory. */
static void bwd_batchnorm(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                          const mw_model_ws *ws, const float *P, float *G, int i, int n,
                          float scale)
{
    const mw_layer *l = &m->layers[i];
    const int C = l->out_c, t = l->in[0] + 1;
    const float *st = ws->stats[i];
    const size_t rows = (size_t)n * l->out_h * l->out_w;
    kt->bn_bwd(k, t > 0 ? ws->grad[t] : NULL, l->w_count ? G + l->w_off : NULL,
               l->b_count ? G + l->b_off : NULL, ws->grad[i + 1], ws->act[t], st, st + 2 * C,
               l->w_count ? P + l->w_off : NULL, rows, C);
    kt->bn_stats_acc(k, G + l->s_off, st, 2 * (size_t)C, scale * (float)n); /* mean, var */
}

/* The backward of the layers Functional graphs add; every one accumulates into dx. */
static void bwd_graph(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                      const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale)
{
    const mw_layer *l = &m->layers[i];
    const int t = l->in[0] + 1, C = l->out_c;
    float *dx = t > 0 ? ws->grad[t] : NULL, *dy = ws->grad[i + 1];
    const float *x = ws->act[t], *y = ws->act[i + 1];
    const size_t cnt = (size_t)n * out_count(l), rows = (size_t)n * l->out_h * l->out_w;
    switch (l->kind) {
    case MW_LAYER_BATCHNORM:
        bwd_batchnorm(m, kt, k, ws, P, G, i, n, scale);
        return;
    case MW_LAYER_ADD:
        for (int j = 0; j < l->nin; j++)
            if (l->in[j] >= 0)
                kt->acc(k, ws->grad[l->in[j] + 1], dy, cnt);
        return;
    case MW_LAYER_MULTIPLY: {
        const int u = l->in[1] + 1;
        kt->mul_bwd(k, dx, u > 0 ? ws->grad[u] : NULL, dy, x, ws->act[u], cnt);
        return;
    }
    case MW_LAYER_CONCAT:
        for (int j = 0, off = 0; j < l->nin; j++) {
            const int tj = l->in[j] + 1;
            const int cj = (int)tensor_count(m, tj) / (l->out_h * l->out_w);
            if (tj > 0)
                kt->concat_bwd(k, ws->grad[tj], dy, rows, cj, C, off);
            off += cj;
        }
        return;
    default:
        break;
    }
    if (!dx)
        return;
    if (l->kind == MW_LAYER_AVGPOOL)
        kt->avgpool_bwd(k, dx, dy, &l->pool, n);
    else if (l->kind == MW_LAYER_ZEROPAD)
        kt->pad2d_bwd(k, dx, dy, l->in_h, l->in_w, l->in_c, l->pad[0], l->pad[1], l->pad[2],
                      l->pad[3], n);
    else if (l->kind == MW_LAYER_ACT)
        kt->act_bwd(k, dx, dy, x, y, cnt, l->act, l->alpha);
    else if (l->kind == MW_LAYER_SOFTMAX)
        kt->softmax_bwd(k, dx, dy, y, rows, C);
}

/* ReLU, Dropout, Flatten and identities: in place they overwrite dy with dx (their sole
 * input's gradient is the same buffer); otherwise dy (no longer needed: every consumer of
 * this output has run) becomes this layer's contribution, added into dx. */
static void bwd_simple(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                       const mw_model_ws *ws, int i, int n)
{
    const mw_layer *l = &m->layers[i];
    const int t = l->in[0] + 1;
    float *dx = t > 0 ? ws->grad[t] : NULL, *dy = ws->grad[i + 1];
    const size_t cnt = (size_t)n * out_count(l);
    if (!dx)
        return;
    float *out = l->in_place ? dx : dy;
    if (l->kind == MW_LAYER_RELU)
        kt->relu_bwd(k, out, dy, ws->act[i + 1], cnt);
    else if (l->kind == MW_LAYER_DROPOUT && ws->training && l->rate > 0.0f)
        kt->dropout_bwd(k, out, dy, ws->mask[i], cnt);
    if (!l->in_place)
        kt->acc(k, dx, dy, cnt);
}

static void bwd_kind(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                     const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale);

/* A 16-bit layer's output gradient is a 16-bit tensor (the complete sum of its consumers'
 * contributions, every one of which has run), rounded before the layer's backward reads it. */
static void bwd_layer(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                      const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale)
{
    const mw_layer *l = &m->layers[i];
    mw_kctx kb = *k;
    kb.bf16 = l->policy == MW_POLICY_MIXED_BFLOAT16;
    kb.f16 = l->policy == MW_POLICY_MIXED_FLOAT16;
    if (l->round_grad)
        round_of(kt, l->policy)(k, ws->grad[i + 1], (size_t)n * out_count(l));
    bwd_kind(m, kt, &kb, ws, layer_params(l, ws, P), G, i, n, scale);
}

static void bwd_kind(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                     const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale)
{
    const mw_layer *l = &m->layers[i];
    const int t = l->in[0] + 1;
    float *dx = t > 0 ? ws->grad[t] : NULL;
    const float *dy = ws->grad[i + 1];
    switch (l->kind) {
    case MW_LAYER_CONV2D:
        kt->conv2d_bwd(k, dx, G + l->w_off, l->has_bias ? G + l->b_off : NULL, dy, ws->act[t],
                       P + l->w_off, &l->conv, n);
        break;
    case MW_LAYER_MAXPOOL:
        if (dx)
            kt->maxpool_bwd(k, dx, dy, ws->argmax[i], &l->pool, n);
        break;
    case MW_LAYER_DENSE:
        kt->dense_bwd(k, dx, G + l->w_off, l->has_bias ? G + l->b_off : NULL, dy, ws->act[t],
                      P + l->w_off, n, l->in_c, l->out_c);
        break;
    case MW_LAYER_RELU:
    case MW_LAYER_DROPOUT:
    case MW_LAYER_FLATTEN:
    case MW_LAYER_IDENTITY:
        bwd_simple(m, kt, k, ws, i, n);
        break;
    default:
        bwd_graph(m, kt, k, ws, P, G, i, n, scale);
        break;
    }
}

void mw_model_backward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int n, float scale, int from, int to)
{
    const float *P = ws->params ? ws->params : m->params.data;
    const int L = m->nlayers;
    if (n <= 0)
        return;
    for (int i = to - 1; i >= from && to < L; i--)
        bwd_layer(m, kt, k, ws, P, grads, i, n, scale);
    if (to < L)
        return;
    /* Zero the input gradients that layer backward functions accumulate into: every input
     * of a layer that is not in place (in place, dx is dy's own buffer). */
    for (int i = 0; i < L; i++) {
        const mw_layer *l = &m->layers[i];
        for (int j = 0; j < l->nin && !l->in_place; j++)
            if (l->in[j] >= 0)
                zero_buf(kt, k, ws->grad[l->in[j] + 1],
                         (size_t)n * tensor_count(m, l->in[j] + 1) * sizeof(float));
    }
    /* mixed_float16's loss scale multiplies the loss, so every gradient, but not the moving
     * statistics' slots that `scale` also weighs (a power of 2: the product is exact) */
    kt->xent_bwd(k, ws->grad[L], ws->prob, ws->labels, scale * mw_model_loss_scale(m), n,
                 m->nclasses);
    for (int i = L - 1; i >= from; i--)
        bwd_layer(m, kt, k, ws, P, grads, i, n, scale);
}

void mw_model_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                       float *grads, int n, float scale)
{
    mw_model_backward_part(m, kt, k, ws, grads, n, scale, 0, m->nlayers);
}

/* ---- synchronized BatchNormalization ---- */

int mw_model_is_sync(const mw_model *m, int i)
{
    return i >= 0 && i < m->nlayers && m->layers[i].kind == MW_LAYER_BATCHNORM && m->layers[i].sync;
}

int mw_model_has_sync(const mw_model *m)
{
    return mw_model_sync_channels(m) > 0;
}

int mw_model_sync_channels(const mw_model *m)
{
    int cmax = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (mw_model_is_sync(m, i) && m->layers[i].out_c > cmax)
            cmax = m->layers[i].out_c;
    return cmax;
}

void mw_model_sync_sums(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model_ws *ws, float *grads, int i, int n, int backward, double *s)
{
    const mw_layer *l = &m->layers[i];
    const int C = l->out_c;
    const float *x = ws->act[l->in[0] + 1], *st = ws->stats[i];
    const size_t rows = (size_t)(n > 0 ? n : 0) * l->out_h * l->out_w;
    /* backward: the same sums are this slice's share of gamma's and beta's gradients (the
     * gradient all-reduce adds the replicas'); they come first, so a 16-bit layer's output
     * gradient is rounded here, as bwd_layer does */
    if (backward && l->round_grad && n > 0)
        round_of(kt, l->policy)(k, ws->grad[i + 1], rows * C);
    if (backward)
        kt->bn_sums(k, s, x, ws->grad[i + 1], st, st + 2 * C, l->w_count ? grads + l->w_off : NULL,
                    l->b_count ? grads + l->b_off : NULL, rows, C);
    else
        kt->bn_sums(k, s, x, NULL, NULL, NULL, NULL, NULL, rows, C);
}

void mw_model_sync_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int i, int n, const double *s, long total)
{
    const mw_layer *l = &m->layers[i];
    const float *P = ws->params ? ws->params : m->params.data;
    const int C = l->out_c;
    const float *g = l->w_count ? P + l->w_off : NULL, *b = l->b_count ? P + l->b_off : NULL;
    float *st = ws->stats[i];
    const size_t hw = (size_t)l->out_h * l->out_w, rows = (size_t)(n > 0 ? n : 0) * hw;
    kt->bn_sync_fwd(k, ws->act[i + 1], st, st + C, st + 2 * C, ws->act[l->in[0] + 1], g, b, s,
                    (double)total * (double)hw, rows, C, l->epsilon);
    if (l->round_out && rows > 0)
        round_of(kt, l->policy)(k, ws->act[i + 1], rows * C);
}

void mw_model_sync_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int i, int n, float scale,
                            const double *s, long total)
{
    const mw_layer *l = &m->layers[i];
    const float *P = ws->params ? ws->params : m->params.data;
    const int C = l->out_c, t = l->in[0] + 1;
    const float *st = ws->stats[i], *g = l->w_count ? P + l->w_off : NULL;
    const float *x = ws->act[t], *dy = ws->grad[i + 1];
    const size_t hw = (size_t)l->out_h * l->out_w, rows = (size_t)n * hw;
    if (n <= 0)
        return;
    if (t > 0)
        kt->bn_sync_bwd(k, ws->grad[t], dy, x, st, st + 2 * C, g, s, (double)total * (double)hw,
                        rows, C);
    kt->bn_stats_acc(k, grads + l->s_off, st, 2 * (size_t)C, scale * (float)n);
}

int mw_model_has_batchnorm(const mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == MW_LAYER_BATCHNORM)
            return 1;
    return 0;
}

void mw_model_update_stats(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, float *params,
                           float *grads)
{
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        if (l->kind == MW_LAYER_BATCHNORM)
            kt->bn_stats_update(k, params + l->s_off, grads + l->s_off, l->s_count, l->momentum);
    }
}

mw_status mw_model_check_kernels(const mw_model *m, const mw_kernels *t)
{
    if (mw_model_policy(m) == MW_POLICY_MIXED_FLOAT16 && !t->round_f16)
        return mw_err(MW_EUNSUPPORTED,
                      "dtype policy mixed_float16: the %s backend does not compute in float16 "
                      "yet; train in float32 (on GPUs --tf32 gives tensor-core speed)",
                      t->name);
    if (mw_model_policy(m) == MW_POLICY_MIXED_BFLOAT16 && !t->round_bf16)
        return mw_err(MW_EUNSUPPORTED,
                      "dtype policy mixed_bfloat16: the %s backend does not compute in "
                      "bfloat16 yet; train on the CPU (--device cpu, a CPU with AVX512_BF16 or "
                      "AMX) or in float32 (--dtype-policy float32)",
                      t->name);
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        int ok = 1;
        switch (l->kind) {
        case MW_LAYER_BATCHNORM:
            ok = t->bn_fwd_train && t->bn_fwd_infer && t->bn_bwd && t->bn_stats_acc &&
                 t->bn_stats_update;
            if (ok && l->sync && !(t->bn_sums && t->bn_sync_fwd && t->bn_sync_bwd))
                return mw_err(MW_EUNSUPPORTED,
                              "layer '%s' (BatchNormalization): synchronized true: the %s "
                              "backend cannot all-reduce batch statistics yet; train this model "
                              "on the CPU (--device cpu) or set synchronized false",
                              l->name, t->name);
            break;
        case MW_LAYER_AVGPOOL:
            ok = t->avgpool_fwd && t->avgpool_bwd;
            break;
        case MW_LAYER_ZEROPAD:
            ok = t->pad2d_fwd && t->pad2d_bwd;
            break;
        case MW_LAYER_MULTIPLY:
            ok = t->mul_fwd && t->mul_bwd;
            break;
        case MW_LAYER_CONCAT:
            ok = t->concat_fwd && t->concat_bwd;
            break;
        case MW_LAYER_ACT:
            ok = t->act_fwd && t->act_bwd;
            break;
        case MW_LAYER_SOFTMAX:
            ok = t->softmax_fwd && t->softmax_bwd;
            break;
        default:
            ok = l->kind == MW_LAYER_ADD || l->in_place || l->kind == MW_LAYER_CONV2D ||
                 l->kind == MW_LAYER_MAXPOOL || l->kind == MW_LAYER_DENSE || t->acc;
        }
        if (l->kind == MW_LAYER_ADD)
            ok = t->acc != NULL;
        if (!ok)
            return mw_err(MW_EUNSUPPORTED,
                          "layer '%s' (%s): the %s kernels do not implement it yet; train this "
                          "model on the CPU (--device cpu)",
                          l->name, l->cls, t->name);
    }
    return MW_OK;
}

int mw_model_correct(const mw_model *m, const mw_model_ws *ws, int n)
{
    return mw_model_correct_host(m, ws->prob, ws->labels, n);
}

int mw_model_correct_host(const mw_model *m, const float *prob, const int32_t *labels, int n)
{
    int correct = 0;
    for (int i = 0; i < n; i++) {
        const float *p = prob + (size_t)i * m->nclasses;
        int best = 0;
        for (int j = 1; j < m->nclasses; j++)
            if (p[j] > p[best])
                best = j;
        correct += best == labels[i];
    }
    return correct;
}

/* The Keras layer whose output tensor idx is (a folded activation belongs to its layer). */
static const char *shown_name(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    return idx < 0 ? (m->input_name[0] ? m->input_name : "input_layer") : m->layers[idx].name;
}

static void shape_text(char *s, size_t n, const mw_layer *l)
{
    if (l->flat)
        snprintf(s, n, "(None, %d)", l->out_c);
    else
        snprintf(s, n, "(None, %d, %d, %d)", l->out_h, l->out_w, l->out_c);
}

/* A graph's rows: Keras' "Connected to" column names each input as layer[0][0]. */
static size_t summary_graph(const mw_model *m, FILE *f)
{
    char shape[48];
    if (m->flat_input)
        snprintf(shape, sizeof shape, "(None, %d)", m->in_c);
    else
        snprintf(shape, sizeof shape, "(None, %d, %d, %d)", m->in_h, m->in_w, m->in_c);
    char label[96];
    snprintf(label, sizeof label, "%s (InputLayer)", shown_name(m, -1));
    fprintf(f, "%-48s %-22s %10d  %s\n", label, shape, 0, "-");
    size_t total = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        if (l->folded)
            continue;
        char conn[512] = "";
        size_t used = 0;
        for (int j = 0; j < l->nin && used < sizeof conn; j++)
            used += (size_t)snprintf(conn + used, sizeof conn - used, "%s%s[0][0]", j ? ", " : "",
                                     shown_name(m, l->in[j]));
        snprintf(label, sizeof label, "%s (%s)", l->name, l->cls);
        shape_text(shape, sizeof shape, l);
        size_t np = l->w_count + l->b_count + l->s_count;
        total += np;
        fprintf(f, "%-48s %-22s %10zu  %s\n", label, shape, np, conn);
    }
    return total;
}

void mw_model_summary(const mw_model *m, FILE *f)
{
    fprintf(f, "Model: \"%s\"\n", m->name);
    size_t total = 0, state = 0;
    for (int i = 0; i < m->nlayers; i++)
        state += m->layers[i].s_count;
    if (m->graph) {
        fprintf(f, "%-48s %-22s %10s  %s\n", "Layer (type)", "Output Shape", "Param #",
                "Connected to");
        fprintf(f, "==================================================================="
                   "==================\n");
        total = summary_graph(m, f);
        fprintf(f, "==================================================================="
                   "==================\n");
    } else {
        fprintf(f, "%-32s %-22s %10s\n", "Layer (type)", "Output Shape", "Param #");
        fprintf(f, "=================================================================\n");
        for (int i = 0; i < m->nlayers; i++) {
            const mw_layer *l = &m->layers[i];
            if (l->folded)
                continue;
            char label[96], shape[48];
            snprintf(label, sizeof label, "%s (%s)", l->name, l->cls);
            shape_text(shape, sizeof shape, l);
            size_t np = l->w_count + l->b_count + l->s_count;
            total += np;
            fprintf(f, "%-32s %-22s %10zu\n", label, shape, np);
        }
        fprintf(f, "=================================================================\n");
    }
    fprintf(f, "Total params: %zu\nTrainable params: %zu\nNon-trainable params: %zu\n", total,
            total - state, state);
}

/* ---- comparing two models (mw_model_diff) ------------------------------------------------- */

static int weighted(const mw_layer *l)
{
    return l->kind == MW_LAYER_CONV2D || l->kind == MW_LAYER_DENSE;
}

/* The first layer from i on that the summary shows (not a folded activation); nlayers when
 * none is left. */
static int next_shown(const mw_model *m, int i)
{
    while (i < m->nlayers && m->layers[i].folded)
        i++;
    return i;
}

static int count_shown(const mw_model *m)
{
    int n = 0;
    for (int i = next_shown(m, 0); i < m->nlayers; i = next_shown(m, i + 1))
        n++;
    return n;
}

/* The activation of shown layer i. A folded one belongs to the nearest Conv2D or Dense before
 * it: right after it, or after the MaxPool that finalize moved before it (pool_before_relu). */
static const char *act_name(const mw_layer *l)
{
    static const char *const names[] = {"sigmoid", "tanh", "gelu",      "gelu_tanh",
                                        "silu",    "elu",  "leaky_relu"};
    if (l->kind == MW_LAYER_ACT)
        return names[l->act];
    return l->kind == MW_LAYER_RELU ? "relu" : l->softmax ? "softmax" : "linear";
}

static const char *activation_of(const mw_model *m, int i)
{
    const mw_layer *l = &m->layers[i];
    if (!weighted(l))
        return act_name(l);
    for (int j = i + 1; j < m->nlayers && !weighted(&m->layers[j]); j++)
        if (m->layers[j].folded)
            return act_name(&m->layers[j]);
    return "linear";
}

/* What a layer computes: Activation, ReLU and Softmax layers are all activations. */
static int role(const mw_layer *l)
{
    return l->kind == MW_LAYER_IDENTITY || l->kind == MW_LAYER_ACT || l->kind == MW_LAYER_SOFTMAX
               ? (int)MW_LAYER_RELU
               : (int)l->kind;
}

/* "<what> <x> in the checkpoint, <y> in --model" into d; returns 1. */
static int differs(char *d, size_t n, const char *what, const char *x, const char *y)
{
    snprintf(d, n, "%s%s%s in the checkpoint, %s in --model", what, *what ? " " : "", x, y);
    return 1;
}

static void dims_str(char *s, size_t n, const int *v, int k)
{
    size_t used = 0;
    s[0] = '\0';
    for (int i = 0; i < k && used < n; i++)
        used += (size_t)snprintf(s + used, n - used, i ? "x%d" : "%d", v[i]);
}

/* k sizes shown as AxBxC; 0 when equal. */
static int dims_differ(char *d, size_t n, const char *what, const int *x, const int *y, int k)
{
    if (memcmp(x, y, (size_t)k * sizeof *x) == 0)
        return 0;
    char sx[64], sy[64];
    dims_str(sx, sizeof sx, x, k);
    dims_str(sy, sizeof sy, y, k);
    return differs(d, n, what, sx, sy);
}

/* v as text, with all its digits when the short form would read like other's. */
static void real_str(char *s, size_t n, double v, double other)
{
    char t[40];
    snprintf(s, n, "%g", v);
    snprintf(t, sizeof t, "%g", other);
    if (!strcmp(s, t))
        snprintf(s, n, "%.17g", v);
}

/* Keras' name for r (NULL: none), its values told apart from o's. */
static void reg_str(char *s, size_t n, const mw_regularizer *r, const mw_regularizer *o)
{
    static const mw_regularizer none = {0.0, 0.0};
    char l1[40], l2[40];
    if (!r) {
        snprintf(s, n, "none");
        return;
    }
    o = o ? o : &none;
    real_str(l1, sizeof l1, r->l1, o->l1);
    real_str(l2, sizeof l2, r->l2, o->l2);
    if (r->l1 == 0.0)
        snprintf(s, n, "L2(%s)", l2);
    else if (r->l2 == 0.0)
        snprintf(s, n, "L1(%s)", l1);
    else
        snprintf(s, n, "L1L2(l1=%s, l2=%s)", l1, l2);
}

/* Conv2D and Dense: use_bias, the activation and the regularizers. */
static int weights_differ(char *d, size_t n, const mw_model *a, int i, const mw_model *b, int j)
{
    const mw_layer *x = &a->layers[i], *y = &b->layers[j];
    if (x->has_bias != y->has_bias)
        return differs(d, n, "use_bias", x->has_bias ? "true" : "false",
                       y->has_bias ? "true" : "false");
    const char *ax = activation_of(a, i), *ay = activation_of(b, j);
    if (strcmp(ax, ay) != 0)
        return differs(d, n, "activation", ax, ay);
    for (int t = 0; t < 2; t++) {
        const mw_regularizer *rx = regularizer(x, t), *ry = regularizer(y, t);
        if ((!rx && !ry) || (rx && ry && rx->l1 == ry->l1 && rx->l2 == ry->l2))
            continue;
        char sx[96], sy[96];
        reg_str(sx, sizeof sx, rx, ry);
        reg_str(sy, sizeof sy, ry, rx);
        return differs(d, n, t ? "bias regularizer" : "kernel regularizer", sx, sy);
    }
    return 0;
}

/* Padding by its effect: the zero rows and columns before the input and the output size. */
static int padding_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y, const int *px,
                           const int *py)
{
    if (memcmp(px, py, 4 * sizeof *px) == 0)
        return 0;
    return differs(d, n, "padding", x->same ? "same" : "valid", y->same ? "same" : "valid");
}

/* BatchNormalization: center, scale, synchronized, momentum, epsilon. */
static int bn_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    char sx[40], sy[40];
    if (!!x->w_count != !!y->w_count)
        return differs(d, n, "scale", x->w_count ? "true" : "false", y->w_count ? "true" : "false");
    if (!!x->b_count != !!y->b_count)
        return differs(d, n, "center", x->b_count ? "true" : "false",
                       y->b_count ? "true" : "false");
    if (x->sync != y->sync)
        return differs(d, n, "synchronized", x->sync ? "true" : "false",
                       y->sync ? "true" : "false");
    const float vx[2] = {x->momentum, x->epsilon}, vy[2] = {y->momentum, y->epsilon};
    for (int k = 0; k < 2; k++)
        if (vx[k] != vy[k]) {
            real_str(sx, sizeof sx, vx[k], vy[k]);
            real_str(sy, sizeof sy, vy[k], vx[k]);
            return differs(d, n, k ? "epsilon" : "momentum", sx, sy);
        }
    return 0;
}

/* The settings of x and y (of the same kind) past their input shapes. */
static int config_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_conv2d_geom *cx = &x->conv, *cy = &y->conv;
    const mw_pool_geom *qx = &x->pool, *qy = &y->pool;
    char sx[40], sy[40];
    switch (x->kind) {
    case MW_LAYER_CONV2D:
        return dims_differ(d, n, "filters", &cx->O, &cy->O, 1) ||
               dims_differ(d, n, "kernel", (const int[]){cx->KH, cx->KW},
                           (const int[]){cy->KH, cy->KW}, 2) ||
               dims_differ(d, n, "strides", (const int[]){cx->SH, cx->SW},
                           (const int[]){cy->SH, cy->SW}, 2) ||
               padding_differs(d, n, x, y, (const int[]){cx->PT, cx->PL, cx->OH, cx->OW},
                               (const int[]){cy->PT, cy->PL, cy->OH, cy->OW});
    case MW_LAYER_MAXPOOL:
    case MW_LAYER_AVGPOOL:
        return dims_differ(d, n, "pool size", (const int[]){qx->PH, qx->PW},
                           (const int[]){qy->PH, qy->PW}, 2) ||
               dims_differ(d, n, "strides", (const int[]){qx->SH, qx->SW},
                           (const int[]){qy->SH, qy->SW}, 2) ||
               padding_differs(d, n, x, y, (const int[]){qx->PT, qx->PL, qx->OH, qx->OW},
                               (const int[]){qy->PT, qy->PL, qy->OH, qy->OW});
    case MW_LAYER_DENSE:
        return dims_differ(d, n, "units", &x->out_c, &y->out_c, 1);
    case MW_LAYER_ZEROPAD:
        return dims_differ(d, n, "padding", x->pad, y->pad, 4);
    case MW_LAYER_BATCHNORM:
        return bn_differs(d, n, x, y);
    case MW_LAYER_DROPOUT:
        if (x->rate == y->rate)
            return 0;
        real_str(sx, sizeof sx, x->rate, y->rate);
        real_str(sy, sizeof sy, y->rate, x->rate);
        return differs(d, n, "rate", sx, sy);
    default:
        return 0;
    }
}

/* The shown-layer number of output idx (-1: the model input; a folded activation counts as its
 * layer). */
static int shown_ordinal(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    int k = -1;
    for (int i = 0; i <= idx; i++)
        k += !m->layers[i].folded;
    return idx < 0 ? -1 : k;
}

/* The inputs of layer i as shown-layer numbers ("input" for the model's), into s. */
static void inputs_str(char *s, size_t n, const mw_model *m, int i)
{
    const mw_layer *l = &m->layers[i];
    size_t used = 0;
    s[0] = '\0';
    for (int j = 0; j < l->nin && used < n; j++) {
        int o = shown_ordinal(m, l->in[j]);
        if (o < 0)
            used += (size_t)snprintf(s + used, n - used, "%sthe input", j ? ", " : "");
        else
            used += (size_t)snprintf(s + used, n - used, "%slayer %d", j ? ", " : "", o);
    }
}

/* The first difference between shown layer i of a and shown layer j of b into d; 0: none. */
static int layer_differs(char *d, size_t n, const mw_model *a, int i, const mw_model *b, int j)
{
    const mw_layer *x = &a->layers[i], *y = &b->layers[j];
    if (role(x) != role(y))
        return differs(d, n, "", x->cls, y->cls);
    char ix[160], iy[160];
    inputs_str(ix, sizeof ix, a, i);
    inputs_str(iy, sizeof iy, b, j);
    if (strcmp(ix, iy) != 0)
        return differs(d, n, "inputs", ix, iy);
    if (dims_differ(d, n, "input", (const int[]){x->in_h, x->in_w, x->in_c},
                    (const int[]){y->in_h, y->in_w, y->in_c}, 3) ||
        config_differs(d, n, x, y))
        return 1;
    if (weighted(x) && weights_differ(d, n, a, i, b, j))
        return 1;
    if (role(x) == MW_LAYER_RELU) {
        const char *ax = activation_of(a, i), *ay = activation_of(b, j);
        if (strcmp(ax, ay) != 0)
            return differs(d, n, "activation", ax, ay);
        if (x->kind == MW_LAYER_ACT && x->alpha != y->alpha) {
            char sx[40], sy[40];
            real_str(sx, sizeof sx, x->alpha, y->alpha);
            real_str(sy, sizeof sy, y->alpha, x->alpha);
            return differs(d, n, "alpha", sx, sy);
        }
    }
    return dims_differ(d, n, "output", (const int[]){x->out_h, x->out_w, x->out_c},
                       (const int[]){y->out_h, y->out_w, y->out_c}, 3);
}

int mw_model_diff(const mw_model *a, const mw_model *b, char *what, size_t len)
{
    const int na = count_shown(a), nb = count_shown(b);
    char d[400], head[96] = "";
    if (na != nb)
        snprintf(head, sizeof head, "the checkpoint has %d layers, --model %d", na, nb);
    int k = 0;
    for (int i = next_shown(a, 0), j = next_shown(b, 0); i < a->nlayers && j < b->nlayers;
         i = next_shown(a, i + 1), j = next_shown(b, j + 1), k++) {
        if (!layer_differs(d, sizeof d, a, i, b, j))
            continue;
        const char *nx = a->layers[i].name, *ny = b->layers[j].name;
        char where[200];
        if (!strcmp(nx, ny))
            snprintf(where, sizeof where, "layer %d (%s)", k, nx);
        else
            snprintf(where, sizeof where, "layer %d (%s; %s in --model)", k, nx, ny);
        if (na != nb)
            snprintf(what, len, "%s; the first difference is %s: %s", head, where, d);
        else
            snprintf(what, len, "%s: %s", where, d);
        return 1;
    }
    if (na != nb) {
        snprintf(what, len, "%s (the first %d are alike)", head, k);
        return 1;
    }
    if (len)
        what[0] = '\0';
    return 0;
}
