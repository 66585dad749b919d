/* The padding mask's plan: a model-wide pass in the model's order, each layer treating the mask
 * as its row's rule says (masks.h). Keras 3.15 keeps a padding mask in two places, and a layer
 * takes it from either:
 *  - the graph: a mask the model's graph computes (Embedding(mask_zero=True)'s NotEqual) is
 *    recorded as a call argument of the layers after it (GlobalAveragePooling1D's mask,
 *    MultiHeadAttention's value_mask and key_mask): graph[];
 *  - the run time: a mask travels as an attribute of the output tensor, from the first
 *    input's (Layer.__call__'s previous_mask), and a call argument recorded as None is filled
 *    from it when the layer runs. MultiHeadAttention takes its query mask from the attribute
 *    only, then deletes the attribute from its query, value and key tensors
 *    (keras/src/layers/attention/multi_head_attention.py: "the masks are handled at the level
 *    of the layer"). So a residual Add([x, attention(x, x)]) runs on an x without its mask and
 *    keeps none, and nothing after it sees one at run time: not the loss and the metrics
 *    (they take the output's attribute: loss.masked), not a layer whose graph argument is
 *    None. An attention whose query lost the attribute masks only the keys (keys_only). A
 *    KerasHub block reads its input's attribute (merge_padding_and_attention_mask) and keeps
 *    it on its output (its own attention does not delete it); TokenAndPositionEmbedding
 *    (mask_zero=True) sets only the attribute. The attribute: at[].
 * The layers run in the model's order (Keras runs a graph by depth; in a chain with residuals
 * the orders agree). Each consumer takes the graph's mask, else the attribute. */
#include "worker/model/masks.h"

#include <stdlib.h>

#include "worker/model/graph.h"
#include "worker/model/layer.h"

mw_mask_rule mw_mask_pass(const mw_layer *l)
{
    (void)l;
    return MW_MASK_PASS;
}

mw_mask_rule mw_mask_drop(const mw_layer *l)
{
    (void)l;
    return MW_MASK_DROP;
}

static mw_mask_rule rule_of(const mw_layer *l)
{
    const mw_layer_ops *r = mw_layer_row(l->kind);
    return r->mask ? r->mask(l) : MW_MASK_REFUSE;
}

/* 1 when l passes the mask on with the inputs masked (bit j: input j) carrying it: a PASS
 * layer, with several inputs only when every input has it. */
static int passes(const mw_layer *l, mw_mask_rule rule, int masked)
{
    return rule == MW_MASK_PASS && (l->nin <= 1 || masked == (1 << l->nin) - 1);
}

/* MultiHeadAttention's run-time masks: value and key, the graph's argument, else the
 * attribute; query, the attribute; and the attribute taken off the tensors it reads. */
static void attend(mw_layer *l, unsigned char *at, int first, int gbits, int *from)
{
    for (int j = 1; j < l->nin; j++)
        if (at[l->in[j]])
            l->masked |= 1 << j, *from = l->in[j];
    l->mha.keys_only = (gbits & 1) && !first;
    if (first)
        l->masked |= 1, *from = l->in[0];
    for (int j = 0; j < l->nin; j++)
        if (l->in[j] >= 0)
            at[l->in[j]] = 0;
}

/* The first layer that makes a mask, for messages. */
static const char *mask_maker(const mw_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        const mw_mask_rule r = rule_of(&m->layers[i]);
        if (r == MW_MASK_MAKE || r == MW_MASK_MAKE_AT_RUN)
            return m->layers[i].cls;
    }
    return "Embedding";
}

/* Layer i's masks (masked, mha.keys_only), graph[i] and at[i], after its inputs'; at[] of the
 * tensors an attention reads cleared. block_rt: the attribute a KerasHub block's parts see. */
static mw_status plan_layer(mw_model *m, int i, unsigned char *at, unsigned char *graph,
                            int *block_rt)
{
    mw_layer *l = &m->layers[i];
    const mw_mask_rule rule = rule_of(l);
    const int first = l->nin > 0 ? at[l->in[0]] : 0;
    int from = -1; /* a masked input's producer */
    int gbits = 0; /* the inputs with a mask in the graph */
    for (int j = 0; j < l->nin; j++) {
        const int in = l->in[j];
        /* a block's part reads what comes from outside the block at run time */
        if (l->block && in < l->block - 1 ? at[in] : graph[in])
            gbits |= 1 << j, from = in;
    }
    l->masked = gbits;
    graph[i] = (unsigned char)(rule == MW_MASK_MAKE     ? 1
                               : rule == MW_MASK_ATTEND ? gbits & 1 /* the query's */
                                                        : gbits && passes(l, rule, gbits));
    if (l->block) {
        *block_rt = l->block_first ? first : *block_rt;
        at[i] = (unsigned char)*block_rt;
    } else if (rule == MW_MASK_MAKE || rule == MW_MASK_MAKE_AT_RUN) {
        at[i] = 1;
    } else if (rule == MW_MASK_ATTEND) {
        attend(l, at, first, gbits, &from);
        at[i] = (unsigned char)first;
    } else if (rule == MW_MASK_PASS) {
        at[i] = 1;
        for (int j = 0; j < l->nin; j++)
            at[i] &= at[l->in[j]];
        if (!passes(l, rule, gbits))
            l->masked = 0; /* an input without the mask: the merge has none */
    } else {
        if (first && !gbits)
            l->masked = 1, from = l->in[0]; /* the attribute fills a None argument */
        at[i] = 0;
    }
    if (rule == MW_MASK_ATTEND && l->mha.kmask && l->masked)
        return mw_err(MW_EUNSUPPORTED,
                      "layer '%s' (%s): a padding mask given as a tensor ('%s') and the padding "
                      "mask of %s(mask_zero=True) on its input; supported: one of them",
                      l->name, l->cls, mw_model_producer_name(m, l->mha.kmask - 1), mask_maker(m));
    if (rule == MW_MASK_ATTEND && l->mha.gemma && l->masked) /* Keras' call has no mask */
        return mw_err(MW_EUNSUPPORTED,
                      "layer '%s' (%s) gets the padding mask of %s(mask_zero=True), which "
                      "KerasHub's GemmaDecoderBlock drops; supported: its padding_mask argument "
                      "(a named input)",
                      l->name, l->cls, mask_maker(m));
    if (!l->masked || rule != MW_MASK_REFUSE)
        return MW_OK;
    l->masked = 0;
    return mw_err(MW_EUNSUPPORTED,
                  "layer '%s' (%s) gets the padding mask of %s(mask_zero=True) (through '%s'); "
                  "supported there yet: GlobalAveragePooling1D, MultiHeadAttention, and the "
                  "layers that keep the steps (Dense, LayerNormalization, Add, Multiply, "
                  "Dropout, Activation)",
                  l->name, l->cls, mask_maker(m), mw_model_producer_name(m, from));
}

/* m->mask_t: the tensor every mask-making layer reads its ids from (the model's input, or one
 * named input); two such tensors are refused. */
static mw_status plan_source(mw_model *m)
{
    int src = -1, maker = -1;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_mask_rule r = rule_of(&m->layers[i]);
        if (r != MW_MASK_MAKE && r != MW_MASK_MAKE_AT_RUN)
            continue;
        const int t = m->layers[i].in[0] + 1;
        if (src >= 0 && t != src)
            return mw_err(MW_EUNSUPPORTED,
                          "layers '%s' and '%s' (mask_zero=True) make padding masks from two "
                          "inputs ('%s', '%s'); supported: one input's",
                          m->layers[maker].name, m->layers[i].name,
                          mw_model_producer_name(m, src - 1), mw_model_producer_name(m, t - 1));
        src = t, maker = i;
    }
    m->mask_t = src > 0 ? src : 0;
    return MW_OK;
}

/* Allocates two flags per layer (MW_ENOMEM). */
mw_status mw_masks_plan(mw_model *m)
{
    MW_TRY(plan_source(m));
    /* per layer (index -1: the model's input): at, the attribute of its output when the
     * layers after it run; graph, the mask its output has in Keras' graph */
    unsigned char *buf = calloc(2 * ((size_t)m->nlayers + 1), 1);
    if (!buf)
        return mw_err(MW_ENOMEM, "out of memory for the padding mask's plan");
    unsigned char *at = buf + 1, *graph = buf + m->nlayers + 2;
    int block_rt = 0; /* a KerasHub block's: its input's attribute, when its first part runs */
    mw_status st = MW_OK;
    for (int i = 0; i < m->nlayers && st == MW_OK; i++)
        st = plan_layer(m, i, at, graph, &block_rt);
    m->loss.masked = st == MW_OK && m->nlayers > 0 && at[m->nlayers - 1];
    free(buf);
    MW_TRY(st);
    /* the output's position t is the input's (the layers that pass the mask keep the steps):
     * its input id says whether it counts in the loss and the metrics */
    const mw_layer *last = m->loss.masked ? &m->layers[m->nlayers - 1] : NULL;
    const long steps = m->mask_t ? (long)m->layers[m->mask_t - 1].out_c /* a named input's */
                                 : (long)m->in_h * m->in_w * m->in_c;   /* the input's ids */
    if (last && (last->out_h != 1 || last->out_w != steps)) /* every layer passing it keeps them */
        return mw_err(MW_EINTERNAL,
                      "model: the masked output (layer '%s') has %dx%d positions, the input %ld "
                      "steps",
                      mw_model_producer_name(m, m->nlayers - 1), last->out_h, last->out_w, steps);
    return MW_OK;
}
