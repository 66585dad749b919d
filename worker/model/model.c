/* The model graph: layer shapes, the parameter arena, forward and backward through the
 * backend table. See model.h; the activation workspace is model_ws.c's. */
#include "worker/model/model.h"

#include "worker/model/layer.h"
#include "worker/model/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/rng.h"
#include "worker/model/masks.h"
#include "worker/model/plan.h"

void mw_model_init(mw_model *m, int in_h, int in_w, int in_c)
{
    memset(m, 0, sizeof *m);
    m->in_h = in_h, m->in_w = in_w, m->in_c = in_c;
    snprintf(m->name, sizeof m->name, "sequential");
    mw_loss_default(&m->loss);
    mw_arena_init(&m->params);
}

void mw_model_free(mw_model *m)
{
    free(m->layers);
    free(m->source);
    if (m->pre && m->pre_free)
        m->pre_free(&m->pre);
    free(m->next_in);
    free(m->worder);
    mw_arena_free(&m->params);
    memset(m, 0, sizeof *m);
}

size_t mw_layer_out_count(const mw_layer *l)
{
    return (size_t)l->out_h * l->out_w * l->out_c;
}

mw_layer *mw_layer_push(mw_model *m, int kind, const char *name, const char *cls,
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
    l->kind = (mw_layer_kind)kind;
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
            if (!m->layers[i].folded && !m->layers[i].block && strcmp(m->layers[i].cls, cls) == 0)
                same++;
        if (same == 0)
            snprintf(l->name, sizeof l->name, "%s", auto_base);
        else
            snprintf(l->name, sizeof l->name, "%s_%d", auto_base, same);
    }
    m->nlayers++;
    return l;
}

mw_layer *mw_layer_push_same(mw_model *m, int kind, const char *name, const char *cls,
                             const char *auto_base)
{
    mw_layer *l = mw_layer_push(m, kind, name, cls, auto_base);
    if (l) {
        l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
        l->in_place = 1;
    }
    return l;
}

mw_status mw_layer_reject(mw_model *m, mw_status s)
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

void mw_model_shape_of(const mw_model *m, int idx, int s[3])
{
    if (idx < 0) {
        s[0] = m->in_h, s[1] = m->in_w, s[2] = m->in_c;
        return;
    }
    const mw_layer *p = &m->layers[idx];
    s[0] = p->out_h, s[1] = p->out_w, s[2] = p->out_c;
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

static const char *const policy_names[] = {"float32", "mixed_bfloat16", "mixed_float16"};
_Static_assert(sizeof policy_names / sizeof *policy_names == MW_POLICY_MIXED_FLOAT16 + 1,
               "a name per mw_policy");

const char *mw_policy_name(mw_policy p)
{
    return (unsigned)p < 3 ? policy_names[p] : "?";
}

int mw_policy_half(mw_policy p)
{
    return p == MW_POLICY_MIXED_BFLOAT16 ? 1 : p == MW_POLICY_MIXED_FLOAT16 ? 2 : 0;
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

void mw_model_weight_order(const mw_model *m, int *order)
{
    int k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const int b = m->layers[i].block;
        if (!b) {
            order[k++] = i;
            continue;
        }
        if (b != i + 1)
            continue; /* placed with its block's first layer */
        int last = i;
        while (last + 1 < m->nlayers && m->layers[last + 1].block == b)
            last++;
        for (int r = 0; r <= last - i; r++) /* parts without weights have rank 0 too */
            for (int j = i; j <= last; j++)
                if (m->layers[j].part_rank == r)
                    order[k++] = j;
    }
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
 * is refused here with the way out. A layer that reads token ids (mw_layer_ops.ids) reads
 * them as they are: integers, which 16 bits would round (bfloat16 holds those to 256). */
static mw_status check_policies(const mw_model *m)
{
    int in16 = -1; /* the input's consumers: -1 none yet, 0 float32, 1 16-bit */
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        const int half = l->policy != MW_POLICY_FLOAT32;
        for (int j = 0; j < l->nin && !mw_layer_row(l->kind)->ids; j++) {
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
                if (m->layers[t].op) /* no policy of its own to give it */
                    return mw_err(MW_EUNSUPPORTED,
                                  "layer '%s' (dtype %s) reads the output of the operation "
                                  "'%.*s', which computes in %s: an operation takes its "
                                  "inputs' dtype, float32 when any of them is (a float32 "
                                  "constant, or a float32 layer's output), as JAX promotes; "
                                  "give '%.*s' only %s inputs",
                                  l->name, mw_policy_name(l->policy), pl, pn,
                                  mw_policy_name(m->layers[t].policy), pl, pn,
                                  l->policy == MW_POLICY_MIXED_FLOAT16 ? "float16" : "bfloat16");
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

mw_status mw_model_plan(mw_model *m, size_t pad_multiple)
{
    if (m->nlayers == 0)
        return mw_err(MW_EMODEL, "model has no layers");
    for (int i = 0; i + 1 < m->nlayers; i++)
        if (mw_model_consumers(m, i) == 0)
            return mw_err(MW_EMODEL,
                          "layer '%s': its output is not used; expected every layer to lead to "
                          "the model's output (the last layer)",
                          m->layers[i].name);
    if (mw_model_consumers(m, m->nlayers - 1) != 0)
        return mw_err(MW_EINTERNAL, "model: the last layer feeds another layer");
    MW_TRY(check_policies(m));
    MW_TRY(mw_masks_plan(m));
    mw_model_plan_exec(m);
    const mw_layer *last = &m->layers[m->nlayers - 1];
    /* an output per position: a sequence's (None, T, C), held 1 x T x C, or an image's (None,
     * H, W, C), a segmentation model's per-pixel classes */
    const int per_pos = !last->flat && (last->out_h > 1 || last->out_w > 1);
    if (!last->flat && !per_pos)
        return mw_err(MW_EMODEL,
                      "model output is %dx%dx%d after layer '%s'; the classifier needs a flat "
                      "output (end with Flatten and Dense)",
                      last->out_h, last->out_w, last->out_c, last->name);
    m->nclasses = last->out_c;
    m->positions = per_pos ? last->out_h * last->out_w : 1;
    /* a final softmax folded into a categorical loss: in Keras' terms its output is
     * probabilities (from_logits=False); the loss computes the same from the logits */
    if (last->softmax && (m->loss.kind == MW_LOSS_SPARSE_XENT || m->loss.kind == MW_LOSS_CCE))
        m->loss.d.from_logits = 0;
    free(m->worder);
    if (!(m->worder = malloc((size_t)m->nlayers * sizeof *m->worder)))
        return mw_err(MW_ENOMEM, "model: out of memory");
    mw_model_weight_order(m, m->worder);
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
        if (l->stats_count) {
            l->stats_off = mw_arena_reserve(&m->params, l->stats_count);
            m->nparams += l->stats_count;
            m->nstate += l->stats_count;
        }
    }
    mw_arena_pad_to(&m->params, pad_multiple);
    return MW_OK;
}

mw_status mw_model_alloc_params(mw_model *m)
{
    if (mw_arena_alloc(&m->params) != MW_OK) { /* name the largest tensor */
        mw_err_clear();
        const mw_layer *big = &m->layers[0];
        for (int i = 1; i < m->nlayers; i++)
            if (m->layers[i].w_count > big->w_count)
                big = &m->layers[i];
        return mw_err(MW_ENOMEM,
                      "model: cannot allocate its %zu parameters (%zu floats with padding; the "
                      "largest tensor: layer '%s' (%s), %zu values)",
                      m->nparams, m->params.count, big->name, big->cls, big->w_count);
    }
    m->finalized = 1;
    return MW_OK;
}

mw_status mw_model_finalize(mw_model *m, size_t pad_multiple)
{
    MW_TRY(mw_model_plan(m, pad_multiple));
    return mw_model_alloc_params(m);
}

/* ---- forward / backward ---- */

size_t mw_model_tensor_count(const mw_model *m, int t)
{
    return t == 0 ? (size_t)m->in_h * m->in_w * m->in_c : mw_layer_out_count(&m->layers[t - 1]);
}

void mw_layer_zero(const mw_kernels *kt, const mw_kctx *k, void *p, size_t nbytes)
{
    if (kt->zero)
        kt->zero(k, p, nbytes);
    else
        memset(p, 0, nbytes);
}

void mw_layer_copy(const mw_kernels *kt, const mw_kctx *k, float *y, const float *x, size_t count)
{
    if (kt->add2) { /* 0 + x in one pass: the bits of the two below */
        kt->add2(k, y, x, NULL, count);
        return;
    }
    mw_layer_zero(kt, k, y, count * sizeof *y);
    kt->acc(k, y, x, count);
}

void mw_layer_pass_fwd(const mw_layer_call *c)
{
    if (!c->l->in_place)
        mw_layer_copy(c->kt, c->k, c->y, c->x, c->cnt);
}

int mw_layer_stays_16bit_always(const mw_layer *l, int backward)
{
    (void)l, (void)backward;
    return 1;
}

float *mw_layer_bwd_out(const mw_layer_call *c)
{
    return c->l->in_place ? c->dx : c->dy;
}

void mw_layer_pass_bwd(const mw_layer_call *c)
{
    if (c->dx && !c->l->in_place)
        c->kt->acc(c->k, c->dx, c->dy, c->cnt);
}

void mw_layer_round(const mw_kernels *kt, const mw_kctx *k, int policy, float *x, size_t count)
{
    (policy == MW_POLICY_MIXED_FLOAT16 ? kt->round_f16 : kt->round_bf16)(k, x, count);
}

/* The parameters layer l computes with: its matmul weights (a reverse call's tied ones)
 * rounded to 16 bits under a mixed policy (Keras casts the float32 variable to the compute dtype
 * at use), P else. */
static const float *layer_params(const mw_layer *l, const mw_model_ws *ws, const float *P)
{
    const mw_layer_ops *row = mw_layer_row(l->kind);
    return (row->matmul || row->tied16) && l->policy != MW_POLICY_FLOAT32 && ws->params16
               ? ws->params16
               : P;
}

/* A mixed policy, before a forward from layer 0: the model's input rounded when its
 * consumers compute in 16 bits (mw_model_finalize refused a mix; token ids never), and the
 * matmul layers' weights (and the tables the reverse calls read) rounded into ws->params16. */
static void fwd_casts(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      const float *P, int n)
{
    if (!ws->params16)
        return;
    int input16 = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        for (int j = 0; j < l->nin && !mw_layer_row(l->kind)->ids; j++)
            input16 |= l->in[j] < 0 && l->policy != MW_POLICY_FLOAT32;
        if (l->policy != MW_POLICY_FLOAT32 && mw_layer_row(l->kind)->tied16) {
            const mw_layer *t = &m->layers[l->tied - 1];
            mw_layer_copy(kt, k, ws->params16 + t->w_off, P + t->w_off, t->w_count);
            mw_layer_round(kt, k, l->policy, ws->params16 + t->w_off, t->w_count);
        }
        if (l->policy == MW_POLICY_FLOAT32 || !mw_layer_row(l->kind)->matmul)
            continue;
        mw_layer_copy(kt, k, ws->params16 + l->w_off, P + l->w_off, l->w_count);
        mw_layer_round(kt, k, l->policy, ws->params16 + l->w_off, l->w_count);
        if (l->b_count) {
            mw_layer_copy(kt, k, ws->params16 + l->b_off, P + l->b_off, l->b_count);
            mw_layer_round(kt, k, l->policy, ws->params16 + l->b_off, l->b_count);
        }
    }
    if (input16 && n > 0)
        mw_layer_round(kt, k, mw_model_policy(m), ws->act[0],
                       (size_t)n * mw_model_tensor_count(m, 0));
}

/* Layer i's call: its tensors, and a kernel context whose products' operands are 16-bit
 * under its policy. */
static mw_layer_call call_of(const mw_model *m, const mw_kernels *kt, mw_kctx *kb,
                             const mw_model_ws *ws, const float *P, int i, int n)
{
    const mw_layer *l = &m->layers[i];
    const int t = l->in[0] + 1;
    kb->bf16 = l->policy == MW_POLICY_MIXED_BFLOAT16;
    kb->f16 = l->policy == MW_POLICY_MIXED_FLOAT16;
    return (mw_layer_call){.m = m,
                           .l = l,
                           .kt = kt,
                           .k = kb,
                           .ws = ws,
                           .P = layer_params(l, ws, P),
                           .i = i,
                           .n = n,
                           .x = ws->act[t],
                           .y = ws->act[i + 1],
                           .dx = t > 0 ? ws->grad[t] : NULL,
                           .dy = ws->grad[i + 1],
                           .buf = ws->buf[i],
                           .cnt = (size_t)n * mw_layer_out_count(l),
                           .rows = (size_t)n * l->out_h * l->out_w};
}

void mw_model_forward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                           mw_model_ws *ws, int n, int from, int to)
{
    const float *P = ws->params ? ws->params : m->params.data;
    if (from == 0)
        fwd_casts(m, kt, k, ws, P, n);
    for (int i = from; i < to; i++) {
        const mw_layer *l = &m->layers[i];
        mw_kctx kb = *k;
        if (l->fuse_norm && i + 1 < to) { /* the Add's sum and its norm (plan_fusion) */
            mw_layer_call c = call_of(m, kt, &kb, ws, P, i + 1, n);
            mw_layer_row(c.l->kind)->add_forward(&c, ws->act[l->in[0] + 1], ws->act[l->in[1] + 1]);
            i++;
            continue;
        }
        mw_layer_call c = call_of(m, kt, &kb, ws, P, i, n);
        if (l->fuse_relu && i + 1 < to && /* the norm and its ReLU (plan_fusion) */
            mw_layer_row(l->kind)->relu_forward(&c, l->fuse_relu_max)) {
            i++;
            continue;
        }
        if (l->fuse_act && i + 1 < to && /* the Dense and its activation (plan_fusion) */
            mw_layer_row(l->kind)->act_forward(&c, ws->act[i + 2], l->fuse_act_kind,
                                               l->fuse_act_alpha)) {
            i++;
            continue;
        }
        mw_layer_row(l->kind)->forward(&c);
        if (l->round_out) /* the layer's output is a 16-bit tensor */
            mw_layer_round(kt, k, l->policy, c.y, c.cnt);
    }
    if (to < m->nlayers || n <= 0)
        return;
    const int T = m->positions > 1 ? m->positions : 1;
    /* a sequence (the sparse loss only, worker/session.c): each position a row, and each
     * example's loss the mean of its positions' (Keras: the mean over N x T) */
    float *rows = T > 1 ? ws->loss + n : ws->loss;
    mw_loss_row(m->loss.kind)
        ->forward(kt, k, &m->loss, rows, ws->prob, ws->act[m->nlayers], ws->y, n * T, m->nclasses);
    if (ws->w) /* Keras: sum(w_i loss_i) / size, so each loss (each position's) times its weight */
        kt->scale_rows(k, rows, ws->w, n * T, 1);
    if (T > 1)
        kt->row_mean(k, ws->loss, ws->loss + n, n, T);
}

void mw_model_forward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      int n)
{
    mw_model_forward_part(m, kt, k, ws, n, 0, m->nlayers);
}

/* Zero the gradients of layer i's inputs whose bit is set in mask. */
static void zero_masked(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model_ws *ws, int i, int n, unsigned mask)
{
    const mw_layer *l = &m->layers[i];
    for (int j = 0; j < l->nin; j++)
        if (mask >> j & 1u)
            mw_layer_zero(kt, k, ws->grad[l->in[j] + 1],
                          (size_t)n * mw_model_tensor_count(m, l->in[j] + 1) * sizeof(float));
}

void mw_model_zero_inputs(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                          const mw_model_ws *ws, int i, int n)
{
    zero_masked(m, kt, k, ws, i, n, m->layers[i].zero_in);
}

/* A 16-bit layer's output gradient is a 16-bit tensor (the complete sum of its consumers'
 * contributions, every one of which has run), rounded before the layer's backward reads it.
 * relu: the norm's backward fused with its ReLU's (plan_fusion). */
static void bwd_layer(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                      const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale,
                      int relu)
{
    const mw_layer *l = &m->layers[i];
    mw_kctx kb = *k;
    mw_layer_call c = call_of(m, kt, &kb, ws, P, i, n);
    c.G = G, c.scale = scale;
    /* a row that writes its one input's gradient (sets_dx 1), or any of its inputs' (2), has
     * them written instead of zeroed first */
    const int sets = mw_layer_row(l->kind)->sets_dx;
    c.dx_set = sets == 2 ? l->zero_in : sets && l->nin == 1 && (l->zero_in & 1u) && c.dx ? 1u : 0u;
    zero_masked(m, kt, k, ws, i, n, l->zero_in & ~c.dx_set);
    if (l->round_grad)
        mw_layer_round(kt, k, l->policy, c.dy, c.cnt);
    if (relu)
        mw_layer_row(l->kind)->relu_backward(&c, l->fuse_relu_max);
    else
        mw_layer_row(l->kind)->backward(&c);
}

/* Layer i's backward, and 1 when it did layer i - 1's too (plan_fusion; i - 1 at from or later:
 * in this part): i a norm fused with the Add i - 1, or i the ReLU fused with the norm i - 1
 * (whose training forward was fused: the table has its kernels); then the workspace's hook for
 * each layer done, when it has one. */
static int bwd_step(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                    const mw_model_ws *ws, const float *P, float *G, int i, int n, float scale,
                    int from)
{
    const mw_layer *a = i > from ? &m->layers[i - 1] : NULL;
    const int relu = a && a->fuse_relu && kt->bn_relu_fwd_train && kt->bn_relu_bwd;
    const int fused = (a && a->fuse_norm) || relu;
    if (relu) {
        bwd_layer(m, kt, k, ws, P, G, i - 1, n, scale, 1);
    } else if (!fused) {
        bwd_layer(m, kt, k, ws, P, G, i, n, scale, 0);
    } else {
        mw_model_zero_inputs(m, kt, k, ws, i, n);
        mw_model_zero_inputs(m, kt, k, ws, i - 1, n);
        mw_kctx kb = *k;
        mw_layer_call c = call_of(m, kt, &kb, ws, P, i, n);
        c.G = G, c.scale = scale;
        const int ta = a->in[0] + 1, tb = a->in[1] + 1;
        mw_layer_row(c.l->kind)->add_backward(&c, ta ? ws->grad[ta] : NULL,
                                              tb ? ws->grad[tb] : NULL);
    }
    for (int j = i; ws->layer_done && j >= i - fused; j--)
        ws->layer_done(ws->layer_done_ctx, j);
    return fused;
}

void mw_model_backward_part(const mw_model *m, const mw_kernels *kt, const mw_kctx *k,
                            mw_model_ws *ws, float *grads, int n, float scale, int from, int to)
{
    const float *P = ws->params ? ws->params : m->params.data;
    const int L = m->nlayers;
    if (n <= 0)
        return;
    for (int i = to - 1; i >= from && to < L; i--)
        i -= bwd_step(m, kt, k, ws, P, grads, i, n, scale, from);
    if (to < L)
        return;
    /* mixed_float16's loss scale multiplies the loss, so every gradient, but not the moving
     * statistics' slots that `scale` also weighs (a power of 2: the product is exact) */
    const int T = m->positions > 1 ? m->positions : 1; /* a sequence: each position 1 / T */
    mw_loss_row(m->loss.kind)
        ->backward(kt, k, &m->loss, ws->grad[L], ws->act[L], ws->prob, ws->y,
                   scale * mw_model_loss_scale(m) / (float)T, n * T, m->nclasses);
    if (ws->w) /* a weight per example or per position (mw_dataset_batch_weights) */
        kt->scale_rows(k, ws->grad[L], ws->w, n * T, m->nclasses);
    for (int i = L - 1; i >= from; i--)
        i -= bwd_step(m, kt, k, ws, P, grads, i, n, scale, from);
}

void mw_model_backward(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                       float *grads, int n, float scale)
{
    mw_model_backward_part(m, kt, k, ws, grads, n, scale, 0, m->nlayers);
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
        const mw_layer_ops *r = mw_layer_row(l->kind);
        const int ok = r->has_kernels ? r->has_kernels(l, t) : 1;
        if (ok < 0) /* the row said why */
            return MW_EUNSUPPORTED;
        if (!ok)
            return mw_err(MW_EUNSUPPORTED,
                          "layer '%s' (%s): the %s kernels do not implement it yet; train this "
                          "model on the CPU (--device cpu)",
                          l->name, l->cls, t->name);
    }
    return MW_OK;
}

size_t mw_model_target_bytes(const mw_model *m)
{
    return mw_loss_target_bytes(&m->loss, m->nclasses) *
           (size_t)(m->positions > 1 ? m->positions : 1);
}

mw_metric_list mw_model_metrics(const mw_model *m)
{
    mw_metric_list ml = mw_loss_metrics(&m->loss);
    ml.positions = m->positions > 1 ? m->positions : 1;
    return ml;
}

void mw_model_metrics_add(const mw_model *m, const mw_model_ws *ws, int n, double *acc)
{
    const mw_metric_list ml = mw_model_metrics(m);
    mw_metrics_add_host(&ml, acc, ws->prob, ws->y, mw_model_target_bytes(m), ws->act[m->mask_t],
                        ws->w, n, m->nclasses);
}
