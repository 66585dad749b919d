/* Keras Functional models: the graph around each layer (inbound_nodes, the mask ops Keras
 * writes between layers, the model's one input and one output); see keras_graph.h.
 *
 * Why a file of its own: the graph reading is the Functional reader's alone; each layer's own
 * config goes through keras_read.h like a Sequential model's. */
#include "worker/keras/keras_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/keras/keras_inputs.h"
#include "worker/keras/keras_ops.h"
#include "worker/keras/keras_read.h"
#include "worker/keras/keras_vars.h"
#include "worker/model/keras_keys.h"
#include "worker/model/layer.h"
#include "worker/model/layers/input.h"

/* ---- Functional graphs -------------------------------------------------------------------- */

/* Keras layer names in list order and the model layer that holds each one's output (its
 * folded activation when it has one); -1 for the InputLayer. */
typedef struct {
    const char **name; /* borrowed from the JSON */
    int *idx;
    size_t n;
} knames;

/* The producer named s for layer i: its model index, or a message naming the problem. */
static mw_status resolve(const mw_klayer *L, const knames *K, const json_t *layers, size_t i,
                         const char *s, int *out)
{
    mw_kqbuf q;
    for (size_t j = i; j-- > 0;) /* the latest: a tied layer's reverse call is its own entry */
        if (K->name[j] && !strcmp(K->name[j], s)) {
            *out = K->idx[j];
            return MW_OK;
        }
    for (size_t j = i; j < json_array_size(layers); j++) {
        const json_t *c = json_object_get(json_array_get(layers, j), "config");
        const char *nm = json_string_value(json_object_get(c, "name"));
        if (nm && !strcmp(nm, s))
            return mw_kfail(L, MW_EMODEL,
                            "inbound_nodes: input %s comes at or after this layer (a cycle, or "
                            "layers out of order); expected the layers in topological order",
                            mw_kquote(q, s));
    }
    return mw_kfail(L, MW_EMODEL,
                    "inbound_nodes: input %s is not a layer of the model; expected the name of an "
                    "earlier layer",
                    mw_kquote(q, s));
}

/* One input reference: Keras 3's {"class_name": "__keras_tensor__", "config":
 * {"keras_history": [layer, node, tensor]}} or Keras 2's [layer, node, tensor, kwargs]. */
static mw_status read_ref(const mw_klayer *L, const json_t *t, const char **name)
{
    mw_kdbuf d;
    const json_t *h = t;
    int node = 0, idx = 0;
    if (json_is_object(t))
        h = json_object_get(json_object_get(t, "config"), "keras_history");
    if (!json_is_array(h) || json_array_size(h) < 3 || !json_is_string(json_array_get(h, 0)) ||
        !mw_kas_int(json_array_get(h, 1), 0, 1 << 20, &node) ||
        !mw_kas_int(json_array_get(h, 2), 0, 1 << 20, &idx))
        return mw_kfail(L, MW_EMODEL,
                        "inbound_nodes: found %s as an input; expected a keras tensor with "
                        "keras_history [layer, node, tensor] (Keras 3) or [layer, node, tensor, "
                        "{}] (Keras 2)",
                        mw_kdescribe(d, t));
    if (node != 0 || idx != 0)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes: input node %d, tensor %d of a layer (a shared layer or "
                        "a layer with several outputs); supported: node 0, tensor 0",
                        node, idx);
    *name = json_string_value(json_array_get(h, 0));
    return MW_OK;
}

/* Keras 3 call arguments besides the inputs: only mask (null, or Keras' own mask tensor: see
 * mask_op) and training are allowed. */
static mw_status check_kwargs(const mw_klayer *L, const json_t *kw)
{
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    json_object_foreach((json_t *)kw, key, v)
    {
        if (!strcmp(key, "mask") ||
            (!strcmp(key, "training") && (json_is_boolean(v) || json_is_null(v))))
            continue;
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes: call argument %s is not supported; supported: the "
                        "inputs alone",
                        mw_kquote(q, key));
    }
    return MW_OK;
}

/* Keras 3 writes an arithmetic operator between two tensors (x + y, x * y in a model's code,
 * as ConvNeXt's residual sum) as an operation node of module keras.src.ops.numpy whose two
 * arguments are the operands; Add and Multiply read them as a merge of the two. */
static int numpy_op(const json_t *e)
{
    const char *c = json_string_value(json_object_get(e, "class_name"));
    const char *mod = json_string_value(json_object_get(e, "module"));
    return c && mod && !strcmp(mod, "keras.src.ops.numpy") &&
           (!strcmp(c, "Add") || !strcmp(c, "Multiply"));
}

/* KerasHub's decoder blocks, which take decoder_padding_mask (Gemma's: padding_mask). */
static int decoder_block(const char *cls)
{
    return !strcmp(cls, "TransformerDecoder") || !strcmp(cls, "LlamaTransformerDecoder") ||
           !strcmp(cls, "GemmaDecoderBlock");
}

/* An operation's constant operand: a number (x * 0.5), or a scalar tensor Keras writes as
 * {"class_name": "__tensor__", "config": {"value": v, "dtype": "float32"}} (KerasHub's
 * GemmaBackbone: x * ops.cast(ops.sqrt(hidden_dim), x.dtype), "bfloat16" or "float16" under a
 * mixed policy); its number, else NULL. *dt: its dtype as a policy's compute dtype, -1 for a
 * number (JAX's weak type: it takes the tensor's). */
static const json_t *scalar_dt(const json_t *a, int *dt)
{
    *dt = -1;
    if (json_is_number(a))
        return a;
    const char *cls = json_string_value(json_object_get(a, "class_name"));
    const json_t *cfg = json_object_get(a, "config");
    const char *d = json_string_value(json_object_get(cfg, "dtype"));
    const json_t *v = json_object_get(cfg, "value");
    static const char *const names[] = {"float32", "bfloat16", "float16"};
    for (int j = 0; j < 3 && cls && !strcmp(cls, "__tensor__") && json_is_number(v); j++)
        if (!strcmp(d ? d : "float32", names[j])) {
            *dt = j == 0   ? MW_POLICY_FLOAT32
                  : j == 1 ? MW_POLICY_MIXED_BFLOAT16
                           : MW_POLICY_MIXED_FLOAT16;
            return v;
        }
    return NULL;
}

/* The policy of an operation's layers (Keras writes none for x + y, x * c): its inputs' when
 * they share one and a constant's dtype (kdt, -1 a number) is theirs, as JAX computes a
 * bfloat16 tensor times a Python number or a bfloat16 scalar in bfloat16; float32 else (JAX
 * promotes bfloat16 and float32, or bfloat16 and float16, to float32). */
static mw_policy op_policy(const mw_model *m, const int *in, int nin, int kdt)
{
    mw_policy p = nin > 0 && in[0] >= 0 ? m->layers[in[0]].policy : MW_POLICY_FLOAT32;
    for (int j = 1; j < nin; j++)
        if ((in[j] >= 0 ? m->layers[in[j]].policy : MW_POLICY_FLOAT32) != p)
            return MW_POLICY_FLOAT32;
    return kdt < 0 || kdt == (int)p ? p : MW_POLICY_FLOAT32;
}

/* The input references of layers[i]'s only node: refs[0..*n), borrowed; *kwargs its Keras 3
 * keyword arguments (NULL: none), *konst an operation's constant operand as written (a number
 * or a __tensor__: scalar_dt; NULL: none). A
 * layer of class cls that takes several tensors as its call's
 * arguments (MultiHeadAttention: query, value, and a key, also as kwargs "key") reads its
 * keyword arguments itself; the others have only the inputs. */
static mw_status read_node(const mw_klayer *L, const char *cls, const json_t *e,
                           const json_t **refs, int *n, const json_t **kwargs, const json_t **konst)
{
    *kwargs = NULL, *konst = NULL;
    const int multi = cls && !strcmp(cls, "MultiHeadAttention");
    /* KerasHub's blocks read their own keyword arguments, and refuse a second sequence */
    const int block = cls && (!strcmp(cls, "TransformerEncoder") || decoder_block(cls));
    mw_kdbuf d;
    const json_t *nodes = json_object_get(e, "inbound_nodes"), *list;
    if (!json_is_array(nodes) || json_array_size(nodes) != 1)
        return mw_kfail(
            L, json_is_array(nodes) && json_array_size(nodes) > 1 ? MW_EUNSUPPORTED : MW_EMODEL,
            "inbound_nodes: found %s; expected one node (a layer called once)",
            mw_kdescribe(d, nodes));
    const json_t *node = json_array_get(nodes, 0);
    if (json_is_object(node)) { /* Keras 3 */
        const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
        if (multi && json_is_array(args) && json_array_size(args) >= 1 &&
            json_array_size(args) <= 3) {
            const json_t *key = json_is_object(kw) ? json_object_get(kw, "key") : NULL;
            *n = (int)json_array_size(args);
            for (int j = 0; j < *n; j++)
                refs[j] = json_array_get(args, (size_t)j);
            if (key && !json_is_null(key)) {
                if (*n != 2)
                    return mw_kfail(L, MW_EMODEL,
                                    "inbound_nodes[0]: a key in kwargs beside %d arguments; "
                                    "expected query and value as arguments",
                                    *n);
                refs[(*n)++] = key;
            }
            *kwargs = json_is_object(kw) ? kw : NULL;
            return MW_OK;
        }
        if (numpy_op(e) && json_is_array(args) && json_array_size(args) == 2) {
            refs[0] = json_array_get(args, 0), refs[1] = json_array_get(args, 1), *n = 2;
            int dt;
            for (int j = 0; j < 2; j++)
                if (scalar_dt(refs[j], &dt)) { /* x + 3.0, 3.0 + x: one tensor and a constant */
                    *konst = refs[j];
                    refs[0] = refs[1 - j], *n = 1;
                    break;
                }
            return MW_OK; /* x + y, x * y written as operations */
        }
        if (block && json_is_array(args) && json_array_size(args) == 2) {
            refs[0] = json_array_get(args, 0), refs[1] = json_array_get(args, 1), *n = 2;
            return MW_OK; /* the block refuses it, naming what it supports */
        }
        if (!json_is_array(args) || json_array_size(args) != 1)
            return mw_kfail(L, MW_EMODEL, "inbound_nodes[0].args: found %s; expected one argument",
                            mw_kdescribe(d, args));
        if (kw && json_is_object(kw) && block)
            *kwargs = kw;
        else if (kw && json_is_object(kw))
            MW_TRY(check_kwargs(L, kw));
        list = json_array_get(args, 0);
        if (!json_is_array(list)) {
            refs[0] = list, *n = 1;
            return MW_OK;
        }
    } else if (json_is_array(node)) { /* Keras 2 */
        list = node;
    } else {
        return mw_kfail(L, MW_EMODEL, "inbound_nodes[0]: found %s; expected a node",
                        mw_kdescribe(d, node));
    }
    if (json_array_size(list) < 1 || json_array_size(list) > MW_MAX_INPUTS)
        return mw_kfail(L, MW_EUNSUPPORTED, "inbound_nodes: %zu inputs; supported: 1 to %d",
                        json_array_size(list), MW_MAX_INPUTS);
    *n = (int)json_array_size(list);
    for (int j = 0; j < *n; j++)
        refs[j] = json_array_get(list, (size_t)j);
    return MW_OK;
}

/* The InputLayers of a Functional model's layer list. */
static int count_inputs(const json_t *layers)
{
    int n = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const char *cls =
            json_string_value(json_object_get(json_array_get(layers, i), "class_name"));
        n += cls && !strcmp(cls, "InputLayer");
    }
    return n;
}

/* The graph's InputLayer is layers[0], the only one unless the model takes several named
 * inputs (multi); input_layers names them. */
static mw_status check_graph_input(const char *origin, const json_t *conf, const json_t *layers,
                                   int multi)
{
    const json_t *il = json_object_get(conf, "input_layers");
    size_t ni = json_is_array(il) && json_is_array(json_array_get(il, 0)) ? json_array_size(il) : 1;
    if (ni != 1 && !multi)
        return mw_keras_fail_at(origin, MW_EUNSUPPORTED,
                                "input_layers: the model has %zu inputs; supported: one input, "
                                "or several named inputs at the top of a Functional model",
                                ni);
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *e = json_array_get(layers, i);
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        const char *nm = json_string_value(json_object_get(json_object_get(e, "config"), "name"));
        mw_kqbuf q;
        if (cls && !strcmp(cls, "InputLayer") && i > 0 && !multi)
            return mw_keras_fail_at(origin, MW_EUNSUPPORTED,
                                    "layer %s (InputLayer): a second input; supported: one input",
                                    mw_kquote(q, nm ? nm : "?"));
        if (i == 0 && (!cls || strcmp(cls, "InputLayer") != 0))
            return mw_keras_fail_at(origin, MW_EMODEL,
                                    "layers[0]: a Functional model starts with its InputLayer");
    }
    return MW_OK;
}

/* output_layers names the last layer, the model's only output. */
static mw_status check_graph_output(const char *origin, const json_t *conf, const char *last)
{
    const json_t *ol = json_object_get(conf, "output_layers");
    mw_kqbuf q, r;
    if (json_is_array(ol) && json_is_array(json_array_get(ol, 0))) {
        if (json_array_size(ol) != 1)
            return mw_keras_fail_at(
                origin, MW_EUNSUPPORTED,
                "output_layers: the model has %zu outputs; supported: one output",
                json_array_size(ol));
        ol = json_array_get(ol, 0);
    }
    const char *nm = json_string_value(json_array_get(ol, 0));
    if (!nm || !last || strcmp(nm, last) != 0)
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "output_layers: names %s; expected the last layer of the list, %s",
                                mw_kquote(q, nm ? nm : "nothing"), mw_kquote(r, last ? last : "?"));
    return MW_OK;
}

/* The model index standing for a mask tensor (see mask_op) in knames. */
#define MASK_NODE (-2)

/* Keras 3 writes the padding mask's computation into a Functional graph as operation layers
 * (module keras.src.ops.numpy): NotEqual(ids, 0), which Embedding(mask_zero=True) computes,
 * and LogicalOr / LogicalAnd of masks, which merges compute; layers get them as call
 * arguments (mask, query_mask, ...). mwtrain plans the same mask from the Embedding
 * (mw_masks_plan), so these nodes are checked to be that mask and add no layer. */
static int is_mask_op(const json_t *e)
{
    const char *c = json_string_value(json_object_get(e, "class_name"));
    const char *mod = json_string_value(json_object_get(e, "module"));
    return c && mod && !strncmp(mod, "keras.src.ops", 13) &&
           (!strcmp(c, "NotEqual") || !strcmp(c, "LogicalOr") || !strcmp(c, "LogicalAnd"));
}

/* A mask op's node: NotEqual of the model's input (or a named input) and 0, or a logical op of
 * two masks. */
static mw_status mask_op(const mw_model *m, const mw_klayer *L, const knames *K,
                         const json_t *layers, size_t i, const char *cls)
{
    mw_kdbuf d;
    const json_t *nodes = json_object_get(json_array_get(layers, i), "inbound_nodes");
    const json_t *node = json_array_get(nodes, 0);
    const json_t *args = json_object_get(node, "args");
    if (!json_is_array(nodes) || json_array_size(nodes) != 1 || !json_is_array(args) ||
        json_array_size(args) != 2)
        return mw_kfail(L, MW_EMODEL, "inbound_nodes: found %s; expected one node of 2 arguments",
                        mw_kdescribe(d, nodes));
    const int ne = !strcmp(cls, "NotEqual");
    for (size_t j = 0; j < 2; j++) {
        const json_t *a = json_array_get(args, j);
        const char *src = NULL;
        int idx = 0;
        if (ne && j == 1) {
            if (!json_is_number(a) || json_number_value(a) != 0)
                return mw_kfail(L, MW_EUNSUPPORTED,
                                "inbound_nodes[0].args[1]: found %s; supported: 0 (the padding "
                                "mask of Embedding(mask_zero=True))",
                                mw_kdescribe(d, a));
            continue;
        }
        MW_TRY(read_ref(L, a, &src));
        MW_TRY(resolve(L, K, layers, i, src, &idx));
        const int ids = idx == -1 || (idx >= 0 && m->layers[idx].kind == MW_LAYER_INPUT);
        if (ne ? !ids : idx != MASK_NODE)
            return mw_kfail(L, MW_EUNSUPPORTED, "inbound_nodes[0].args[%zu]: %s; supported: %s", j,
                            mw_kdescribe(d, a),
                            ne ? "the model's input (the padding mask of "
                                 "Embedding(mask_zero=True))"
                               : "masks (NotEqual, LogicalOr, LogicalAnd)");
    }
    return MW_OK;
}

/* KerasHub's blocks take a padding mask as a tensor argument (padding_mask,
 * decoder_padding_mask): a named input of the model may be one. */
static int block_mask_arg(const char *cls, const char *key)
{
    const int gemma = cls && !strcmp(cls, "GemmaDecoderBlock");
    return cls && ((!strcmp(cls, "TransformerEncoder") && !strcmp(key, "padding_mask")) ||
                   (gemma && !strcmp(key, "padding_mask")) ||
                   (decoder_block(cls) && !gemma && !strcmp(key, "decoder_padding_mask")));
}

/* 1 when v is a list of nulls: no mask for any input (Keras' mask of a call on several
 * tensors, as a nested model's). */
static int no_masks(const json_t *v)
{
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) if (!json_is_null(x)) return 0;
    return json_is_array(v);
}

/* Every call argument of a node that holds a tensor (mask, query_mask, ...) must be a mask
 * op's (the layers read their masks from the plan, not from the file), or a named input given
 * to a KerasHub block as its padding mask (B->kmask). */
static mw_status check_mask_args(mw_kbuilder *B, const mw_klayer *L, const knames *K,
                                 const json_t *layers, size_t i, const json_t *kw, const char *cls)
{
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    json_object_foreach((json_t *)kw, key, v)
    {
        const size_t n = strlen(key);
        if (!(json_is_object(v) || json_is_array(v)) ||
            !(!strcmp(key, "mask") || (n > 5 && !strcmp(key + n - 5, "_mask"))) || no_masks(v))
            continue; /* not a tensor (use_causal_mask: a flag) */
        const char *src = NULL;
        int idx = 0;
        MW_TRY(read_ref(L, v, &src));
        MW_TRY(resolve(L, K, layers, i, src, &idx));
        if (idx >= 0 && B->m->layers[idx].kind == MW_LAYER_INPUT && block_mask_arg(cls, key)) {
            B->kmask = idx + 1;
            continue;
        }
        if (idx != MASK_NODE)
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "inbound_nodes[0].kwargs.%s: the output of %s; supported: the "
                            "padding mask of Embedding(mask_zero=True), and a named input as "
                            "the padding_mask of KerasHub's TransformerEncoder "
                            "(decoder_padding_mask of TransformerDecoder and "
                            "LlamaTransformerDecoder, padding_mask of GemmaDecoderBlock)",
                            key, mw_kquote(q, src));
    }
    return MW_OK;
}

static mw_status check_used(const mw_kbuilder *B);

static mw_status add_nested(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *cfg,
                            const char *name, const int *in, int nin, int last,
                            const json_t *siblings, size_t at, int *out);

/* The layers after the InputLayer of a Functional model's list: the model's own (top), whose
 * every layer must lead to its output, or a nested one's (last: the nested model is its
 * model's last layer). */
static mw_status graph_layers(mw_kbuilder *B, const json_t *layers, knames *K, int last, int top)
{
    const size_t n = json_array_size(layers);
    for (size_t i = 1; i < n; i++) {
        mw_klayer L = {B->origin, "", MW_POLICY_FLOAT32, NULL};
        const char *cls = NULL, *name = NULL, *src = NULL;
        const json_t *cfg = NULL, *refs[MW_MAX_INPUTS];
        int in[MW_MAX_INPUTS], nin = 0;
        MW_TRY(mw_keras_read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!name)
            return mw_kfail(&L, MW_EMODEL, "name is missing; a Functional model names its layers");
        if (top && B->m->parts.n && !strcmp(cls, "InputLayer")) { /* a named input */
            K->name[i] = name;
            MW_TRY(mw_keras_add_input(B, &L, cfg, name, &K->idx[i]));
            continue;
        }
        if (!top && K->name[i]) /* a nested model's InputLayer, bound to its call's input */
            continue;
        if (is_mask_op(json_array_get(layers, i)) && i + 1 < n) {
            MW_TRY(mask_op(B->m, &L, K, layers, i, cls));
            K->name[i] = name;
            K->idx[i] = MASK_NODE;
            continue;
        }
        if (mw_keras_op_is(cls, json_array_get(layers, i))) { /* keras_ops.h */
            int in0 = 0;
            MW_TRY(read_ref(&L, mw_keras_op_input(json_array_get(layers, i)), &src));
            MW_TRY(resolve(&L, K, layers, i, src, &in0));
            MW_TRY(mw_keras_op_add(B, &L, cls, json_array_get(layers, i), in0, name));
            K->name[i] = name, K->idx[i] = B->m->nlayers - 1;
            continue;
        }
        const json_t *kwargs = NULL,
                     *node = json_array_get(
                         json_object_get(json_array_get(layers, i), "inbound_nodes"), 0);
        const json_t *konst = NULL;
        MW_TRY(read_node(&L, cls, json_array_get(layers, i), refs, &nin, &kwargs, &konst));
        B->kmask = 0;
        if (json_is_object(node) && json_is_object(json_object_get(node, "kwargs")))
            MW_TRY(check_mask_args(B, &L, K, layers, i, json_object_get(node, "kwargs"), cls));
        for (int j = 0; j < nin; j++) {
            MW_TRY(read_ref(&L, refs[j], &src));
            MW_TRY(resolve(&L, K, layers, i, src, &in[j]));
            if (in[j] == MASK_NODE)
                return mw_kfail(&L, MW_EUNSUPPORTED,
                                "inbound_nodes: input %d is a mask (%s); supported: masks as "
                                "the call's mask arguments",
                                j, src);
        }
        K->name[i] = name;
        if (mw_keras_is_nested(cls)) { /* a model used as a layer: its layers in its place */
            MW_TRY(add_nested(B, &L, cls, cfg, name, in, nin, last && i + 1 == n, layers, i,
                              &K->idx[i]));
            continue;
        }
        mw_status rc = mw_model_set_inputs(B->m, in, nin);
        if (rc != MW_OK)
            return mw_kfrom_model(B->origin, rc);
        int kdt = -1;
        const json_t *kv = konst ? scalar_dt(konst, &kdt) : NULL;
        const int op = numpy_op(json_array_get(layers, i)), first = B->m->nlayers;
        const mw_policy opp = op ? op_policy(B->m, in, nin, kdt) : L.policy;
        B->has_konst = kv != NULL;
        B->konst = kv ? json_number_value(kv) : 0.0; /* rounded at use (merge.c) */
        rc = mw_keras_add_layer(B, &L, cls, cfg, name, last && i + 1 == n, kwargs);
        B->has_konst = 0, B->kmask = 0;
        MW_TRY(rc);
        for (int j = first; op && j < B->m->nlayers; j++)
            B->m->layers[j].policy = opp, B->m->layers[j].op = 1;
        K->idx[i] = B->m->nlayers - 1;
    }
    if (n < 2)
        return mw_keras_fail_at(B->origin, MW_EMODEL, "the model has no layers besides its input");
    return top ? check_used(B) : MW_OK;
}

/* Every layer of the model leads to its output (the last layer). */
static mw_status check_used(const mw_kbuilder *B)
{
    const mw_model *m = B->m;
    for (int i = 0; i + 1 < m->nlayers; i++) { /* every layer leads to the output */
        int used = 0;
        for (int j = i + 1; j < m->nlayers && !used; j++) {
            for (int t = 0; t < m->layers[j].nin; t++)
                used |= m->layers[j].in[t] == i;
            used |= m->layers[j].kind == MW_LAYER_MHA && m->layers[j].mha.kmask == i + 1;
        }
        if (!used)
            return mw_keras_fail_at(
                B->origin, MW_EMODEL,
                "layer '%s' (%s): its output is not used; expected every layer to lead "
                "to the model's output (the last layer)",
                m->layers[i].name, m->layers[i].cls);
    }
    return MW_OK;
}

/* ---- nested models ------------------------------------------------------------------------ */

int mw_keras_is_nested(const char *cls)
{
    return !strcmp(cls, "Sequential") || !strcmp(cls, "Functional");
}

/* The keys of a nested model's config besides the layers' own (worker/model/keras_keys.h). */
static const mw_kkey seq_keys[] = {
    MW_KREAD("layers"),
    MW_KIGN("build_input_shape", "the input's shape, which the layer before it gives"),
    MW_KEND,
};
static const mw_kkey fn_keys[] = {MW_KREAD("layers"), MW_KREAD("input_layers"),
                                  MW_KREAD("output_layers"), MW_KEND};

/* Records nested model cls named name, entry at of its model's layer list siblings: its group
 * in .weights.h5 is its model's own, then the snake-case class numbered among the siblings
 * before it (Keras' _save_container_state), as a layer's key is. */
static mw_status add_nest(mw_kbuilder *B, const mw_klayer *L, const char *cls, const char *name,
                          const json_t *siblings, size_t at)
{
    mw_model *m = B->m;
    char mine[64], other[64], key[96];
    if (m->nnests >= MW_MAX_NESTS)
        return mw_kfail(L, MW_EUNSUPPORTED, "more than %d nested models", MW_MAX_NESTS);
    mw_keras_snake_case(cls, mine, sizeof mine);
    int before = 0;
    for (size_t j = 0; j < at; j++) {
        const char *c =
            json_string_value(json_object_get(json_array_get(siblings, j), "class_name"));
        mw_keras_snake_case(c ? c : "", other, sizeof other);
        before += !strcmp(mine, other);
    }
    snprintf(key, sizeof key, before ? "%s_%d" : "%s", mine, before);
    if (B->backbone && !B->nest) /* KerasHub's backbone, a Functional of its own class */
        snprintf(key, sizeof key, "%s", B->backbone);
    mw_nest *nt = &m->nests[m->nnests];
    char up[sizeof nt->path];
    snprintf(up, sizeof up, "%s", B->nest ? m->nests[B->nest - 1].path : "");
    const int len = up[0] ? snprintf(nt->path, sizeof nt->path, "%s/layers/%s", up, key)
                          : snprintf(nt->path, sizeof nt->path, "%s", key);
    if (len >= (int)sizeof nt->path)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "nested models %d deep; the path of its weights is "
                        "longer than %zu bytes",
                        B->nest + 1, sizeof nt->path - 1);
    snprintf(nt->name, sizeof nt->name, "%s", name);
    B->nest = ++m->nnests;
    return MW_OK;
}

/* A nested Sequential's layers, in a chain from input in; *out the last one. */
static mw_status nested_sequential(mw_kbuilder *B, const json_t *layers, int in, int last, int *out)
{
    const size_t n = json_array_size(layers);
    int prev = in, added = 0;
    for (size_t j = 0; j < n; j++) {
        mw_klayer L = {B->origin, "", MW_POLICY_FLOAT32, NULL};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(mw_keras_read_layer(&L, json_array_get(layers, j), j, &cls, &cfg, &name));
        if (!strcmp(cls, "InputLayer")) {
            MW_TRY(mw_keras_check_input_layer(&L, cfg, j));
            continue;
        }
        if (mw_keras_is_nested(cls)) {
            MW_TRY(mw_keras_add_nested(B, &L, cls, cfg, name, prev, last && j + 1 == n, layers, j,
                                       &prev));
        } else {
            mw_status rc = mw_model_set_inputs(B->m, &prev, 1);
            if (rc != MW_OK)
                return mw_kfrom_model(B->origin, rc);
            MW_TRY(mw_keras_add_layer(B, &L, cls, cfg, name, last && j + 1 == n, NULL));
            prev = B->m->nlayers - 1;
        }
        added++;
    }
    if (!added)
        return mw_keras_fail_at(B->origin, MW_EMODEL, "the model has no layers besides its input");
    *out = prev;
    return MW_OK;
}

/* The place of InputLayer name among a Functional config's input_layers ([[name, 0, 0], ...]
 * or {key: [name, 0, 0], ...}); -1 when it is not there. */
static int input_place(const json_t *conf, const char *name)
{
#define SAME_NAME(j) (name && json_string_value(j) && !strcmp(json_string_value(j), name))
    const json_t *il = json_object_get(conf, "input_layers"), *v;
    const char *key;
    int k = 0;
    if (json_is_array(il) && !json_is_array(json_array_get(il, 0)))
        return SAME_NAME(json_array_get(il, 0)) ? 0 : -1;
    if (json_is_array(il)) {
        for (size_t j = 0; j < json_array_size(il); j++)
            if (SAME_NAME(json_array_get(json_array_get(il, j), 0)))
                return (int)j;
        return -1;
    }
    json_object_foreach((json_t *)il, key, v)
    {
        if (SAME_NAME(json_array_get(v, 0)))
            return k;
        k++;
    }
    return -1;
#undef SAME_NAME
}

/* Each InputLayer of a nested Functional's list stands for the input of its call at its place
 * in input_layers (in[0..nin)). */
static mw_status bind_inputs(mw_kbuilder *B, const json_t *conf, const json_t *layers, knames *K,
                             const int *in, int nin)
{
    int bound = 0;
    for (size_t i = 0; i < K->n; i++) {
        mw_klayer L = {B->origin, "", MW_POLICY_FLOAT32, NULL};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(mw_keras_read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (strcmp(cls, "InputLayer") != 0)
            continue;
        MW_TRY(mw_keras_check_input_layer(&L, cfg, 0));
        const int k = input_place(conf, name);
        if (k < 0 || k >= nin)
            return mw_kfail(&L, MW_EMODEL,
                            "an InputLayer that is not among input_layers (the model's %d "
                            "inputs); expected each InputLayer named there",
                            nin);
        K->name[i] = name ? name : "", K->idx[i] = in[k], bound++;
    }
    if (bound != nin)
        return mw_keras_fail_at(B->origin, MW_EMODEL,
                                "called with %d inputs, but the model has %d InputLayers; "
                                "expected one tensor per input",
                                nin, bound);
    return MW_OK;
}

/* A nested Functional's layers, its InputLayers standing for inputs in[0..nin); *out its
 * output. */
static mw_status nested_functional(mw_kbuilder *B, const json_t *conf, const json_t *layers,
                                   const int *in, int nin, int last, int *out)
{
    const size_t n = json_array_size(layers);
    if (n == 0 || n > MW_KERAS_MAX_LAYERS)
        return mw_keras_fail_at(B->origin, n ? MW_EUNSUPPORTED : MW_EMODEL,
                                "layers: %zu layers; expected the InputLayer first and at most %d",
                                n, MW_KERAS_MAX_LAYERS);
    MW_TRY(check_graph_input(B->origin, conf, layers, nin > 1));
    knames K = {calloc(n, sizeof(char *)), calloc(n, sizeof(int)), n};
    mw_status rc =
        K.name && K.idx ? MW_OK : mw_keras_fail_at(B->origin, MW_ENOMEM, "out of memory");
    if (rc == MW_OK)
        rc = bind_inputs(B, conf, layers, &K, in, nin);
    if (rc == MW_OK)
        rc = graph_layers(B, layers, &K, last, 0);
    if (rc == MW_OK)
        rc = check_graph_output(B->origin, conf, K.name[n - 1]);
    if (rc == MW_OK)
        *out = K.idx[n - 1];
    free(K.name);
    free(K.idx);
    return rc;
}

static mw_status add_nested(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *cfg,
                            const char *name, const int *in, int nin, int last,
                            const json_t *siblings, size_t at, int *out)
{
    const int seq = !strcmp(cls, "Sequential");
    if (nin != 1 && seq)
        return mw_kfail(L, MW_EUNSUPPORTED, "%d inputs of a nested Sequential; expected one", nin);
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, seq ? seq_keys : fn_keys, 1));
    const json_t *layers = json_object_get(cfg, "layers");
    mw_kdbuf d;
    if (!json_is_array(layers))
        return mw_kfail(L, MW_EMODEL, "config.layers: found %s; expected the list of layers",
                        mw_kdescribe(d, layers));
    if (!name)
        return mw_kfail(L, MW_EMODEL, "name is missing; a nested model is named");
    const int up = B->nest;
    const char *origin = B->origin;
    char where[sizeof L->where + 512]; /* its layers' messages name it: "<origin>: <it>" */
    snprintf(where, sizeof where, "%s: %s", origin, L->where);
    MW_TRY(add_nest(B, L, cls, name, siblings, at));
    B->origin = where;
    mw_status rc = seq ? nested_sequential(B, layers, in[0], last, out)
                       : nested_functional(B, cfg, layers, in, nin, last, out);
    B->origin = origin, B->nest = up;
    return rc;
}

mw_status mw_keras_add_nested(mw_kbuilder *B, const mw_klayer *L, const char *cls,
                              const json_t *cfg, const char *name, int in, int last,
                              const json_t *siblings, size_t at, int *out)
{
    return add_nested(B, L, cls, cfg, name, &in, 1, last, siblings, at, out);
}

/* mw_keras_build_graph for a model of several named inputs (or data of named inputs). */
static mw_status build_named(mw_kbuilder *B, const json_t *conf, const json_t *layers,
                             const int shape[3], int nclasses)
{
    const size_t n = json_array_size(layers);
    MW_TRY(check_graph_input(B->origin, conf, layers, 1));
    knames K = {calloc(n, sizeof(char *)), calloc(n, sizeof(int)), n};
    mw_status rc =
        K.name && K.idx ? MW_OK : mw_keras_fail_at(B->origin, MW_ENOMEM, "out of memory");
    if (rc == MW_OK)
        rc = mw_keras_start_named(B, conf, layers, shape, count_inputs(layers), &K.name[0],
                                  &K.idx[0]);
    if (rc == MW_OK)
        rc = graph_layers(B, layers, &K, 1, 1);
    if (rc == MW_OK)
        rc = check_graph_output(B->origin, conf, K.name[n - 1]);
    if (rc == MW_OK)
        rc = mw_keras_check_parts_used(B);
    free(K.name);
    free(K.idx);
    MW_TRY(rc);
    return mw_keras_check_output(B, nclasses);
}

mw_status mw_keras_build_graph(mw_kbuilder *B, const json_t *model, const json_t *conf,
                               const json_t *layers, const int shape[3], int nclasses)
{
    const char *origin = B->origin;
    const size_t n = json_array_size(layers);
    if (n > MW_KERAS_MAX_LAYERS)
        return mw_keras_fail_at(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                                MW_KERAS_MAX_LAYERS);
    if (n == 0) /* K below holds layers[0] */
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "layers: an empty list; expected the InputLayer first");
    if (count_inputs(layers) > 1 || B->parts)
        return build_named(B, conf, layers, shape, nclasses);
    MW_TRY(check_graph_input(origin, conf, layers, 0));
    mw_kshape s;
    MW_TRY(mw_keras_find_input(origin, model, conf, layers, &s));
    MW_TRY(mw_keras_start_model(B, &s, shape[0], shape[1], shape[2]));
    MW_TRY(mw_keras_set_model_name(B, conf));
    B->m->graph = 1;
    const char *in_name = json_string_value(
        json_object_get(json_object_get(json_array_get(layers, 0), "config"), "name"));
    snprintf(B->m->input_name, sizeof B->m->input_name, "%s", in_name ? in_name : "input_layer");
    mw_klayer L0 = {origin, "", MW_POLICY_FLOAT32, NULL};
    const char *cls0 = NULL, *name0 = NULL;
    const json_t *cfg0 = NULL;
    MW_TRY(mw_keras_read_layer(&L0, json_array_get(layers, 0), 0, &cls0, &cfg0, &name0));
    MW_TRY(mw_keras_check_input_layer(&L0, cfg0, 0));
    knames K = {calloc(n, sizeof(char *)), calloc(n, sizeof(int)), n};
    mw_status rc = K.name && K.idx ? MW_OK : mw_keras_fail_at(origin, MW_ENOMEM, "out of memory");
    if (rc == MW_OK) {
        K.name[0] = in_name ? in_name : "", K.idx[0] = -1;
        rc = graph_layers(B, layers, &K, 1, 1);
    }
    if (rc == MW_OK)
        rc = check_graph_output(origin, conf, K.name[n - 1]);
    free(K.name);
    free(K.idx);
    MW_TRY(rc);
    return mw_keras_check_output(B, nclasses);
}
