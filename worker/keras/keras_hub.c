/* KerasHub's task models as Functional graphs; see keras_hub.h.
 *
 * Each builder below writes, for a model's arguments, the layer list KerasHub 0.32's Python
 * builds (keras_hub/src/models/<model>/<model>_backbone.py and the task's file): the same
 * classes with the same configs, called on the same tensors, in the same order. Keras numbers
 * the groups of .weights.h5 by class in that order, so the order is part of the format. The
 * graph goes through the Functional reader (keras_graph.c), so every layer's config is checked
 * there as in any model; here only the model's own arguments are, each against its table. */
#include "worker/keras/keras_hub.h"

#include <stdio.h>
#include <string.h>

#include "worker/keras/keras_read.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layers/embedding.h"

int mw_keras_hub_is(const json_t *model)
{
    const char *reg = json_string_value(json_object_get(model, "registered_name"));
    return reg && !strncmp(reg, "keras_hub>", 10);
}

/* ---- pieces of a Functional config -------------------------------------------------------- */

/* A reference to layer's output (its first node's first tensor). */
static json_t *tensor(const char *layer)
{
    return json_pack("{s:s, s:{s:[s, i, i]}}", "class_name", "__keras_tensor__", "config",
                     "keras_history", layer, 0, 0);
}

/* inbound_nodes of one call: args (stolen), kwargs (stolen; NULL: none). */
static json_t *call(json_t *args, json_t *kwargs)
{
    return json_pack("[{s:o, s:o}]", "args", args, "kwargs", kwargs ? kwargs : json_object());
}

/* The call on one tensor, the output of layer. */
static json_t *on(const char *layer)
{
    return call(json_pack("[o]", tensor(layer)), NULL);
}

/* A layer entry: Keras class cls (KerasHub's when hub), config (stolen) to which its name and
 * the model's dtype policy are added, and its nodes (stolen). 0 when out of memory. */
static int add(json_t *layers, const char *cls, int hub, const char *name, json_t *config,
               const json_t *dtype, json_t *nodes)
{
    char reg[96];
    snprintf(reg, sizeof reg, "keras_hub>%s", cls);
    json_t *e = config && nodes ? json_pack("{s:s, s:s, s:o, s:o}", "class_name", cls, "name", name,
                                            "config", config, "inbound_nodes", nodes)
                                : NULL;
    if (!e) {
        if (!config || !nodes) /* json_pack steals both, also when it fails */
            json_decref(config), json_decref(nodes);
        return 0;
    }
    if (hub)
        json_object_set_new(e, "registered_name", json_string(reg));
    json_object_set_new(config, "name", json_string(name));
    if (dtype)
        json_object_set(config, "dtype", (json_t *)dtype);
    return json_array_append_new(layers, e) == 0;
}

/* An InputLayer of token ids (None, None). */
static int input(json_t *layers, const char *name)
{
    json_t *e =
        json_pack("{s:s, s:s, s:{s:s, s:[n, n], s:s}, s:[]}", "class_name", "InputLayer", "name",
                  name, "config", "name", name, "batch_shape", "dtype", "int32", "inbound_nodes");
    return e && json_array_append_new(layers, e) == 0;
}

/* keras.initializers.RandomNormal(0, stddev), as Keras writes it. */
static json_t *normal(double stddev)
{
    return json_pack("{s:s, s:{s:f, s:f, s:n}}", "class_name", "RandomNormal", "config", "mean",
                     0.0, "stddev", stddev, "seed");
}

/* keras.initializers.TruncatedNormal(0, stddev). */
static json_t *truncated(double stddev)
{
    return json_pack("{s:s, s:{s:f, s:f, s:n}}", "class_name", "TruncatedNormal", "config", "mean",
                     0.0, "stddev", stddev, "seed");
}

static json_t *layer_norm(double epsilon)
{
    return json_pack("{s:[i], s:f, s:b, s:b, s:b}", "axis", -1, "epsilon", epsilon, "center", 1,
                     "scale", 1, "rms_scaling", 0);
}

/* KerasHub's gelu_approximate, as a .keras config names the function. */
static json_t *gelu_approximate(void)
{
    return json_pack("{s:s, s:s}", "class_name", "function", "config",
                     "keras_hub>gelu_approximate");
}

/* ---- the backbones ------------------------------------------------------------------------ */

/* A backbone's arguments, read from its config against its table. */
typedef struct {
    int vocab, layers, heads, hidden, ff, max_len, segments;
    double dropout;
    const json_t *dtype;
    int classes;              /* a classifier task's num_classes */
    double head_dropout;      /* its dropout */
    const json_t *activation; /* its output's activation (borrowed from its config) */
} hub_args;

static const mw_kkey gpt2_keys[] = {
    MW_KREAD("vocabulary_size"),     MW_KREAD("num_layers"),
    MW_KREAD("num_heads"),           MW_KREAD("hidden_dim"),
    MW_KREAD("intermediate_dim"),    MW_KREAD("dropout"),
    MW_KREAD("max_sequence_length"), MW_KEND,
};

static mw_status gpt2_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "GPT2Backbone", cfg, gpt2_keys, 1));
    MW_TRY(mw_kget_int(L, cfg, "vocabulary_size", 0, 1, 1, 1 << 24, &a->vocab));
    MW_TRY(mw_kget_int(L, cfg, "num_layers", 0, 1, 1, 256, &a->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &a->heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &a->hidden));
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &a->ff));
    MW_TRY(mw_kget_int(L, cfg, "max_sequence_length", 1024, 0, 1, MW_KMAX_POSITIONS, &a->max_len));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.1, &a->dropout));
    if (a->hidden % a->heads)
        return mw_kfail(L, MW_EMODEL, "hidden_dim %d is not a multiple of num_heads %d", a->hidden,
                        a->heads);
    return MW_OK;
}

/* GPT2Backbone: token and position embeddings, added, dropout, num_layers pre-norm
 * TransformerDecoders (gelu_approximate, epsilon 1e-5, RandomNormal(0.02)) given the padding
 * mask, a final LayerNormalization. */
static json_t *gpt2_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    int ok =
        ls && input(ls, "token_ids") &&
        add(ls, "ReversibleEmbedding", 1, "token_embedding",
            json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim", a->hidden,
                      "embeddings_initializer", normal(0.01), "mask_zero", 0, "tie_weights", 1),
            dt, on("token_ids")) &&
        add(ls, "PositionEmbedding", 1, "position_embedding",
            json_pack("{s:i, s:o}", "sequence_length", a->max_len, "initializer", normal(0.02)), dt,
            on("token_embedding")) &&
        add(ls, "Add", 0, "embeddings_add", json_object(), dt,
            call(json_pack("[[o, o]]", tensor("token_embedding"), tensor("position_embedding")),
                 NULL)) &&
        add(ls, "Dropout", 0, "embeddings_dropout", json_pack("{s:f}", "rate", a->dropout), dt,
            on("embeddings_add")) &&
        input(ls, "padding_mask");
    char prev[64] = "embeddings_dropout", name[64];
    for (int i = 0; ok && i < a->layers; i++) {
        snprintf(name, sizeof name, "transformer_layer_%d", i);
        ok = add(ls, "TransformerDecoder", 1, name,
                 json_pack("{s:i, s:i, s:f, s:o, s:f, s:o, s:{s:s, s:{}}, s:b}", "intermediate_dim",
                           a->ff, "num_heads", a->heads, "dropout", a->dropout, "activation",
                           gelu_approximate(), "layer_norm_epsilon", 1e-5, "kernel_initializer",
                           normal(0.02), "bias_initializer", "class_name", "Zeros", "config",
                           "normalize_first", 1),
                 dt,
                 call(json_pack("[o]", tensor(prev)),
                      json_pack("{s:o}", "decoder_padding_mask", tensor("padding_mask"))));
        snprintf(prev, sizeof prev, "%s", name);
    }
    ok = ok && add(ls, "LayerNormalization", 0, "layer_norm", layer_norm(1e-5), dt, on(prev));
    if (!ok) {
        json_decref(ls);
        return NULL;
    }
    return ls;
}

static const mw_kkey bert_keys[] = {
    MW_KREAD("vocabulary_size"),     MW_KREAD("num_layers"),       MW_KREAD("num_heads"),
    MW_KREAD("hidden_dim"),          MW_KREAD("intermediate_dim"), MW_KREAD("dropout"),
    MW_KREAD("max_sequence_length"), MW_KREAD("num_segments"),     MW_KEND,
};

static mw_status bert_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "BertBackbone", cfg, bert_keys, 1));
    MW_TRY(mw_kget_int(L, cfg, "vocabulary_size", 0, 1, 1, 1 << 24, &a->vocab));
    MW_TRY(mw_kget_int(L, cfg, "num_layers", 0, 1, 1, 256, &a->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &a->heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &a->hidden));
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &a->ff));
    MW_TRY(mw_kget_int(L, cfg, "max_sequence_length", 512, 0, 1, MW_KMAX_POSITIONS, &a->max_len));
    MW_TRY(mw_kget_int(L, cfg, "num_segments", 2, 0, 1, 1 << 16, &a->segments));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.1, &a->dropout));
    if (a->hidden % a->heads)
        return mw_kfail(L, MW_EMODEL, "hidden_dim %d is not a multiple of num_heads %d", a->hidden,
                        a->heads);
    return MW_OK;
}

/* x[:, 0, :]: a sequence's first position (Keras' GetItem operation). */
static json_t *first_step(const char *layer)
{
    json_t *all = json_pack("{s:s, s:{s:n, s:n, s:n}}", "class_name", "__slice__", "config",
                            "start", "stop", "step");
    return call(json_pack("[o, [O, i, o]]", tensor(layer), all, 0, all), NULL);
}

/* BertBackbone: token (ReversibleEmbedding), position and segment embeddings added,
 * LayerNormalization (epsilon 1e-12), dropout, num_layers post-norm TransformerEncoders
 * given the padding mask, then the pooler: the first position's features, Dense(tanh). All
 * initializers TruncatedNormal(0.02). */
static json_t *bert_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    int ok =
        ls && input(ls, "token_ids") &&
        add(ls, "ReversibleEmbedding", 1, "token_embedding",
            json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim", a->hidden,
                      "embeddings_initializer", truncated(0.02), "mask_zero", 0, "tie_weights", 1),
            dt, on("token_ids")) &&
        input(ls, "segment_ids") &&
        add(ls, "PositionEmbedding", 1, "position_embedding",
            json_pack("{s:i, s:o}", "sequence_length", a->max_len, "initializer", truncated(0.02)),
            dt, on("token_embedding")) &&
        add(ls, "Embedding", 0, "segment_embedding",
            json_pack("{s:i, s:i, s:o, s:b}", "input_dim", a->segments, "output_dim", a->hidden,
                      "embeddings_initializer", truncated(0.02), "mask_zero", 0),
            dt, on("segment_ids")) &&
        add(ls, "Add", 0, "embeddings_add", json_object(), dt,
            call(json_pack("[[o, o, o]]", tensor("token_embedding"), tensor("position_embedding"),
                           tensor("segment_embedding")),
                 NULL)) &&
        add(ls, "LayerNormalization", 0, "embeddings_layer_norm", layer_norm(1e-12), dt,
            on("embeddings_add")) &&
        add(ls, "Dropout", 0, "embeddings_dropout", json_pack("{s:f}", "rate", a->dropout), dt,
            on("embeddings_layer_norm")) &&
        input(ls, "padding_mask");
    char prev[64] = "embeddings_dropout", name[64];
    for (int i = 0; ok && i < a->layers; i++) {
        snprintf(name, sizeof name, "transformer_layer_%d", i);
        ok = add(ls, "TransformerEncoder", 1, name,
                 json_pack("{s:i, s:i, s:f, s:o, s:f, s:o, s:{s:s, s:{}}, s:b}", "intermediate_dim",
                           a->ff, "num_heads", a->heads, "dropout", a->dropout, "activation",
                           gelu_approximate(), "layer_norm_epsilon", 1e-12, "kernel_initializer",
                           truncated(0.02), "bias_initializer", "class_name", "Zeros", "config",
                           "normalize_first", 0),
                 dt,
                 call(json_pack("[o]", tensor(prev)),
                      json_pack("{s:o}", "padding_mask", tensor("padding_mask"))));
        snprintf(prev, sizeof prev, "%s", name);
    }
    ok = ok && add(ls, "GetItem", 0, "get_item", json_object(), dt, first_step(prev)) &&
         add(ls, "Dense", 0, "pooled_dense",
             json_pack("{s:i, s:s, s:b, s:o}", "units", a->hidden, "activation", "tanh", "use_bias",
                       1, "kernel_initializer", truncated(0.02)),
             dt, on("get_item"));
    if (!ok) {
        json_decref(ls);
        return NULL;
    }
    return ls;
}

/* ---- the task models ---------------------------------------------------------------------- */

/* A causal LM's head: the reverse call of the backbone's token embedding (the tied output
 * projection) on its output. */
static int lm_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    (void)a;
    json_t *rev = json_pack("{s:s, s:s, s:s, s:{s:s}, s:o}", "class_name", "ReversibleEmbedding",
                            "registered_name", "keras_hub>ReversibleEmbedding", "name",
                            "token_embedding", "config", "name", "token_embedding", "inbound_nodes",
                            call(json_pack("[o]", tensor(bb)), json_pack("{s:b}", "reverse", 1)));
    *out = "token_embedding";
    return rev && json_array_append_new(ls, rev) == 0;
}

/* A text classifier's head: Dropout and Dense(num_classes, activation) on the pooled output. */
static int classifier_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    *out = "logits";
    json_t *act = a->activation ? json_incref((json_t *)a->activation) : json_string("linear");
    return add(ls, "Dropout", 0, "classifier_dropout", json_pack("{s:f}", "rate", a->head_dropout),
               a->dtype, on(bb)) &&
           add(ls, "Dense", 0, "logits",
               json_pack("{s:i, s:o, s:b, s:o}", "units", a->classes, "activation", act, "use_bias",
                         1, "kernel_initializer", truncated(0.02)),
               a->dtype, on("classifier_dropout"));
}

/* The keys of a task model's config: its backbone, its preprocessor (Python: mwtrain trains on
 * the token ids it produced), its name; a classifier's head. */
static const mw_kkey lm_keys[] = {
    MW_KREAD("backbone"),
    MW_KIGN("preprocessor", "the tokenizer runs in Python: the data are the ids it produced"),
    MW_KEND,
};
static const mw_kkey classifier_keys[] = {
    MW_KREAD("backbone"),
    MW_KIGN("preprocessor", "the tokenizer runs in Python: the data are the ids it produced"),
    MW_KREAD("num_classes"),
    MW_KREAD("activation"),
    MW_KREAD("dropout"),
    MW_KEND,
};

static mw_status classifier_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kget_int(L, cfg, "num_classes", 0, 1, 1, 1 << 24, &a->classes));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.1, &a->head_dropout));
    a->activation = json_object_get(cfg, "activation");
    if (a->activation && !json_is_string(a->activation) && !json_is_null(a->activation)) {
        mw_kdbuf d;
        return mw_kfail(L, MW_EUNSUPPORTED, "activation: found %s; expected a Keras name",
                        mw_kdescribe(d, a->activation));
    }
    if (json_is_null(a->activation))
        a->activation = NULL;
    return MW_OK;
}

typedef struct {
    const char *task, *backbone, *snake; /* classes; the backbone's group in .weights.h5 */
    mw_status (*args)(const mw_klayer *L, const json_t *cfg, hub_args *a); /* the backbone's */
    json_t *(*layers)(const hub_args *a);
    const char *const *inputs; /* the backbone's, in its input_layers' order */
    const char *output;        /* the backbone's output the task reads: its last layer's */
    const mw_kkey *task_keys;
    mw_status (*task_args)(const mw_klayer *L, const json_t *cfg, hub_args *a); /* or NULL */
    int (*head)(json_t *ls, const char *bb, const hub_args *a, const char **out);
} hub_model;

static const char *const token_inputs[] = {"token_ids", "padding_mask", NULL};
static const char *const bert_inputs[] = {"token_ids", "segment_ids", "padding_mask", NULL};

static const hub_model models[] = {
    {"GPT2CausalLM", "GPT2Backbone", "gpt2_backbone", gpt2_args, gpt2_layers, token_inputs,
     "layer_norm", lm_keys, NULL, lm_head},
    {"BertTextClassifier", "BertBackbone", "bert_backbone", bert_args, bert_layers, bert_inputs,
     "pooled_dense", classifier_keys, classifier_args, classifier_head},
};
#define NMODELS (sizeof models / sizeof *models)

const char *mw_keras_hub_tasks(void)
{
    static char list[256];
    if (!list[0])
        for (size_t i = 0; i < NMODELS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     models[i].task);
    return list;
}

/* The task: its inputs, the backbone (a nested Functional) on them, its head on the backbone's
 * output. */
static json_t *task_model(const hub_model *hm, const hub_args *a, const char *task_name,
                          const char *bb_name, json_t *bb_layers)
{
    json_t *ins = json_array(), *refs = json_array(), *ls = json_array();
    for (int k = 0; hm->inputs[k] && ls && ins && refs; k++) {
        json_array_append_new(ins, json_pack("[s, i, i]", hm->inputs[k], 0, 0));
        json_array_append_new(refs, tensor(hm->inputs[k]));
        if (!input(ls, hm->inputs[k]))
            json_decref(ls), ls = NULL;
    }
    json_t *bb = json_pack("{s:s, s:s, s:{s:s, s:o, s:O, s:[[s, i, i]]}, s:o}", "class_name",
                           "Functional", "name", bb_name, "config", "name", bb_name, "layers",
                           bb_layers, "input_layers", ins, "output_layers", hm->output, 0, 0,
                           "inbound_nodes", call(json_pack("[O]", refs), NULL));
    json_t *out = NULL;
    const char *last = NULL;
    if (ls && bb && json_array_append_new(ls, bb) == 0 && hm->head(ls, bb_name, a, &last))
        out = json_pack("{s:s, s:{s:s, s:O, s:O, s:[[s, i, i]]}}", "class_name", "Functional",
                        "config", "name", task_name, "layers", ls, "input_layers", ins,
                        "output_layers", last, 0, 0);
    json_decref(ls), json_decref(ins), json_decref(refs);
    return out;
}

static mw_status find_task(const char *origin, const char *cls, const hub_model **hm)
{
    mw_kqbuf q;
    for (size_t i = 0; i < NMODELS; i++)
        if (!strcmp(cls, models[i].task)) {
            *hm = &models[i];
            return MW_OK;
        }
    return mw_keras_fail_at(origin, MW_EUNSUPPORTED,
                            "class_name %s: this KerasHub model is not read; supported: the task "
                            "models %s (a backbone alone has no output layer to train)",
                            mw_kquote(q, cls), mw_keras_hub_tasks());
}

mw_status mw_keras_hub_expand(const char *origin, const json_t *model, json_t **out,
                              const char **backbone)
{
    const char *cls = json_string_value(json_object_get(model, "class_name"));
    const json_t *cfg = json_object_get(model, "config");
    const hub_model *hm = NULL;
    MW_TRY(find_task(origin, cls ? cls : "", &hm));
    mw_klayer L = {origin, "", MW_POLICY_FLOAT32, NULL};
    snprintf(L.where, sizeof L.where, "%s", hm->task);
    MW_TRY(mw_kcheck_keys(origin, L.where, hm->task, cfg, hm->task_keys, 1));
    hub_args a = {0};
    if (hm->task_args)
        MW_TRY(hm->task_args(&L, cfg, &a));
    const json_t *bb = json_object_get(cfg, "backbone");
    const char *bcls = json_string_value(json_object_get(bb, "class_name"));
    const json_t *bcfg = json_object_get(bb, "config");
    mw_kqbuf q;
    if (!bcls || strcmp(bcls, hm->backbone) != 0 || !json_is_object(bcfg))
        return mw_kfail(&L, MW_EMODEL, "config.backbone: class_name %s; expected %s with a config",
                        mw_kquote(q, bcls ? bcls : "(none)"), hm->backbone);
    snprintf(L.where, sizeof L.where, "%s: backbone (%s)", hm->task, hm->backbone);
    MW_TRY(hm->args(&L, bcfg, &a));
    a.dtype = json_object_get(bcfg, "dtype");
    const char *tname = json_string_value(json_object_get(cfg, "name"));
    const char *bname = json_string_value(json_object_get(bcfg, "name"));
    json_t *layers = hm->layers(&a);
    *out = layers ? task_model(hm, &a, tname ? tname : hm->snake, bname ? bname : hm->snake, layers)
                  : NULL;
    if (!*out)
        return mw_keras_fail_at(origin, MW_ENOMEM, "%s: out of memory", hm->task);
    *backbone = hm->snake;
    return MW_OK;
}
