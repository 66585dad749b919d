/* The model's execution plan, made once its layers are known (mw_model_plan): which layers
 * run in place, where 16-bit tensors are rounded, which pairs run fused, which backward zeroes
 * which input gradient. None of it changes a result; model.c's forward and backward follow it. */
#include "worker/model/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/model/layer.h"

int mw_model_consumers(const mw_model *m, int idx)
{
    int n = 0;
    for (int i = 0; i < m->nlayers; i++) {
        for (int j = 0; j < m->layers[i].nin; j++)
            n += m->layers[i].in[j] == idx;
        /* an attention reading a padding mask given as a tensor (a named input) */
        n += m->layers[i].kind == MW_LAYER_MHA && m->layers[i].mha.kmask == idx + 1;
    }
    return n;
}

/* ReLU then MaxPool equals MaxPool then ReLU (ReLU is monotonic, so it
 * commutes with max), and the gradients agree too: where a window's max is
 * <= 0 both give 0, elsewhere both route dy to the same first maximum. After
 * the pool the ReLU touches a quarter of the values, forward and backward. */
static void pool_before_relu(mw_model *m)
{
    for (int i = 0; i + 1 < m->nlayers; i++) {
        mw_layer *r = &m->layers[i], *p = &m->layers[i + 1];
        if (r->kind != MW_LAYER_RELU || !r->folded || p->kind != MW_LAYER_MAXPOOL ||
            p->in[0] != i || mw_model_consumers(m, i) != 1)
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
        if (mw_model_consumers(m, l->in[0]) != 1) {
            l->in_place = 0;
            continue;
        }
        if (l->kind != MW_LAYER_RELU && l->kind != MW_LAYER_RELUX && l->kind != MW_LAYER_DROPOUT)
            continue;
        int p = l->in[0];
        while (p >= 0 && m->layers[p].in_place)
            p = m->layers[p].in[0];
        if (p >= 0 && (m->layers[p].kind == MW_LAYER_ACT || m->layers[p].kind == MW_LAYER_SOFTMAX))
            l->in_place = 0;
    }
}

/* A ReLU of neither slope nor threshold (ReLU, ReLU6, Activation("relu")): max(x, 0), clipped. */
static int relu_only(const mw_layer *l)
{
    return l->kind == MW_LAYER_RELU ||
           (l->kind == MW_LAYER_RELUX && l->alpha == 0.0f && l->relu_threshold == 0.0f);
}

/* The activation layer l computes as dense_act_fwd's kind and alpha: a ReLU without slope or
 * threshold (clipped at its max_value) or Activation's functions; 0 for any other layer. */
static int fusable_act(const mw_layer *l, mw_act_kind *kind, float *alpha)
{
    if (relu_only(l)) {
        *kind = MW_ACTK_RELU, *alpha = l->kind == MW_LAYER_RELUX ? l->relu_max : INFINITY;
        return 1;
    }
    if (l->kind != MW_LAYER_ACT)
        return 0;
    *kind = l->act, *alpha = l->alpha;
    return 1;
}

/* A residual Add (two equal-shaped inputs, no factor) whose sum the next layer normalizes with
 * a row that fuses (layer.h: add_forward) runs as one call with it: one pass over each row
 * instead of three (Add's zero and two sums, then the norm's read), and in the backward one pass
 * that adds the norm's input gradient into both Add inputs' gradients. Its other consumers (the
 * next residual Add of a pre-norm block) read the sum as before. Likewise a normalization whose
 * output a ReLU (relu_only) alone reads, in place, runs as one call with it (layer.h:
 * relu_forward): the clip inside the normalization's pass, and in the backward the ReLU's mask
 * recomputed from the normalization's input, so neither the ReLU's pass nor a read of its output
 * (a tenth of MobileNetV2's step). And a Dense with the activation that reads its output
 * (fusable_act) runs as one call (layer.h: act_forward) that writes both outputs, the bias and
 * the activation in the GEMM's epilogue on the GPU; the backward is the two layers'. Only in
 * float32 (no rounding between the two); MW_FUSE=0 in the environment turns all three off (the
 * same results, bitwise, on the CPU: its fused kernels are the unfused ones in turn). */
static void plan_fusion(mw_model *m)
{
    const char *env = getenv("MW_FUSE");
    const int off = env && !strcmp(env, "0");
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *a = &m->layers[i], *n = i + 1 < m->nlayers ? &m->layers[i + 1] : NULL;
        a->fuse_norm = !off && n && a->kind == MW_LAYER_ADD && a->nin == 2 && !a->bcast &&
                       !a->konst && a->kscale == 1.0f && a->policy == MW_POLICY_FLOAT32 &&
                       n->policy == MW_POLICY_FLOAT32 && mw_layer_row(n->kind)->add_forward &&
                       n->nin == 1 && n->in[0] == i && !n->in_place;
        if (a->fuse_norm)
            mw_log_debug("layer '%s' (Add) runs fused with '%s' (%s)", a->name, n->name, n->cls);
        a->fuse_relu = !off && n && mw_layer_row(a->kind)->relu_forward && !a->sync &&
                       !(i > 0 && m->layers[i - 1].fuse_norm) && a->policy == MW_POLICY_FLOAT32 &&
                       n->policy == MW_POLICY_FLOAT32 && relu_only(n) && n->in[0] == i &&
                       n->in_place;
        a->fuse_relu_max = n && n->kind == MW_LAYER_RELUX ? n->relu_max : INFINITY;
        if (a->fuse_relu)
            mw_log_debug("layer '%s' (%s) runs fused with '%s' (ReLU)", a->name, a->cls, n->name);
        a->fuse_act = !off && n && mw_layer_row(a->kind)->act_forward && !a->round_out &&
                      !n->round_out && a->policy == MW_POLICY_FLOAT32 &&
                      n->policy == MW_POLICY_FLOAT32 && n->nin == 1 && n->in[0] == i &&
                      fusable_act(n, &a->fuse_act_kind, &a->fuse_act_alpha);
        if (a->fuse_act)
            mw_log_debug("layer '%s' (%s) runs fused with '%s' (%s)", a->name, a->cls, n->name,
                         n->cls);
    }
}

/* Each input gradient is zeroed just before the backward that adds into it first (the
 * tensor's consumer of highest index), not all of them before the step's backward: a buffer
 * zeroed while the layers above it run was evicted from the caches by the time its layer added
 * into it (a tenth of MobileNetV2's step); zeroed just before, it is still there. Each tensor is
 * zeroed once (a layer reading it twice, Add(x, x), has one bit). */
static void plan_grad_zero(mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        l->zero_in = 0;
        for (int j = 0; j < l->nin && !l->in_place; j++) {
            int t = l->in[j], later = 0;
            for (int q = 0; q < j; q++)
                later |= l->in[q] == t;
            for (int c = i + 1; c < m->nlayers && !later; c++)
                for (int q = 0; q < m->layers[c].nin; q++)
                    later |= m->layers[c].in[q] == t;
            if (t >= 0 && !later)
                l->zero_in |= 1u << j;
        }
    }
}

/* Whether layer l's output (backward 0) or its input's gradient (backward 1) holds 16-bit
 * values whenever what it computes them from does (its row's stays_16bit). */
static int stays_16bit(const mw_layer *l, int backward)
{
    const mw_layer_ops *r = mw_layer_row(l->kind);
    return r->stays_16bit && r->stays_16bit(l, backward);
}

/* round_out / round_grad of every layer (kernels/cast.h's roundings, only where needed). A
 * tensor's gradient is exact when every consumer's backward is exact, from a 16-bit dy,
 * and there is one (several add up); the last layer's comes from the loss. */
static void plan_rounding(mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mw_layer *l = &m->layers[i];
        const int half = l->policy != MW_POLICY_FLOAT32;
        l->round_out = half && !stays_16bit(l, 0);
        int grad_16bit = i + 1 < m->nlayers && mw_model_consumers(m, i) == 1;
        for (int c = i + 1; c < m->nlayers && grad_16bit; c++)
            for (int j = 0; j < m->layers[c].nin; j++)
                if (m->layers[c].in[j] == i)
                    grad_16bit = stays_16bit(&m->layers[c], 1) && m->layers[c].policy == l->policy;
        l->round_grad = half && !grad_16bit;
    }
}

void mw_model_plan_exec(mw_model *m)
{
    pool_before_relu(m);
    plan_in_place(m);
    plan_rounding(m);
    plan_fusion(m);
    plan_grad_zero(m);
}
