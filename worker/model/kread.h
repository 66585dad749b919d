/* What a layer row's Keras reader (mw_layer_ops.parse, worker/model/layer.h) uses: the model
 * being built, the layer being read (for messages), and the typed readers of config fields,
 * activations, initializers and regularizers, whose messages name the file, the layer, the
 * field and what was expected. worker/keras/keras.c reads the model around the layers. */
#ifndef MW_WORKER_MODEL_KREAD_H
#define MW_WORKER_MODEL_KREAD_H

#include <stddef.h>

#include <jansson.h>

#include "common/status.h"
#include "worker/model/activations.h"
#include "worker/model/model.h"

#define MW_KQUOTE_MAX 48         /* longest piece of user text quoted in a message */
#define MW_KMAX_DIM 65536        /* an input dimension, filters, units */
#define MW_KMAX_WINDOW 1024      /* kernel, pool and stride sizes */
#define MW_KMAX_TENSOR (1 << 28) /* floats in one weight tensor or one example's activation */
/* The key of a model's config (beside compile_config) under which a training run keeps the
 * lengths of named inputs of length None, learnt from the data, in the model it checkpoints:
 * {"token_ids": 128, ...}. An export reads them and leaves the key out of the archive. */
#define MW_KERAS_LENGTHS_KEY "mwtrain_input_lengths"

/* The layer being read, for messages: "layer 'conv2d' (Conv2D)" or "layers[3] (Conv2D)". */
typedef struct mw_klayer {
    const char *origin;
    char where[MW_KQUOTE_MAX * 8 + 96]; /* holds an escaped name and class */
    mw_policy policy;                   /* the layer's dtype policy (read_layer) */
    const char *module;                 /* its entry's "module" (read_layer; borrowed), or NULL */
} mw_klayer;

/* The model being built. */
typedef struct mw_kbuilder {
    const char *origin;
    mw_model *m;
    int no_channels; /* (None, H, W) input not yet flattened: no Conv2D / MaxPooling2D */
    int has_konst;   /* the next layer is an operation on one tensor and the constant konst */
    double konst;    /* (x + 3.0, x * (1 / 6): keras.src.ops.numpy's Add, Multiply) */
    int nest;        /* the nested model being read (mw_layer.nest); 0: the model itself */
    const mw_input_parts *parts; /* the data's named inputs (NULL, or n 0: one input) */
    const json_t *lengths;       /* without data: the named inputs' lengths a training run recorded
                                    in the model it checkpointed (MW_KERAS_LENGTHS_KEY), or NULL */
    int kmask;            /* the layer being read gets a padding mask as a tensor argument: 1 + the
                             producer (a named input's InputLayer); 0: none */
    const char *backbone; /* a KerasHub task model (worker/keras/keras_hub.h): the group in
                             .weights.h5 of its backbone, the model's nested Functional; NULL */
} mw_kbuilder;

/* Regularizers and constraints common to Conv2D and Dense; adds the layer's weights'
 * settings after the layer itself was added. */
typedef struct {
    mw_init kinit, binit;
    mw_regularizer kreg, breg;
    mw_activation act;
    int use_bias;
} mw_kweights;

/* Room for one quoted piece of user text (mw_kquote). */
typedef char mw_kqbuf[MW_KQUOTE_MAX * 4 + 8];

/* What a row's parse gets: the model being built, the layer being read, and whether it is
 * the model's last layer (a softmax there is folded into the loss). */
struct mw_kread {
    mw_kbuilder *B;
    const mw_klayer *L;
    int is_last;
    const json_t *kwargs; /* a Functional call's keyword arguments (inbound_nodes[0].kwargs) for
                             the rows that read them (MultiHeadAttention), else NULL */
};

/* "s", escaped and shortened. */
const char *mw_kquote(mw_kqbuf q, const char *s);

/* Room for what a JSON value is (mw_kdescribe): a quoted piece of user text and its words. */
typedef char mw_kdbuf[MW_KQUOTE_MAX * 4 + 64];

/* What a JSON value is, for "found ...", written into buf. */
const char *mw_kdescribe(mw_kdbuf buf, const json_t *v);

/* "origin: layer ...: message" as the error, with status s. */
mw_status mw_kfail(const mw_klayer *L, mw_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A failed mw_model_add_* recorded its own message; give it the origin prefix. */
mw_status mw_kfrom_model(const char *origin, mw_status rc);

/* An integral JSON number in [lo, hi] (reals such as 3.0 too); 0 when it is not one. */
int mw_kas_int(const json_t *v, long long lo, long long hi, int *out);

/* cfg[key]: an integer in [lo, hi]; absent gives def, unless required. */
mw_status mw_kget_int(const mw_klayer *L, const json_t *cfg, const char *key, int def, int required,
                      int lo, int hi, int *out);

/* cfg[key]: n or [a, b] (Keras normalizes both to a pair), each in [lo, hi]. Absent (or
 * null) gives (def, def); def 0 makes it required. */
mw_status mw_kget_pair(const mw_klayer *L, const json_t *cfg, const char *key, int def, int lo,
                       int hi, int out[2]);

/* cfg[key]: true or false; absent gives def. */
mw_status mw_kget_bool(const mw_klayer *L, const json_t *cfg, const char *key, int def, int *out);

/* obj[key]: a finite number; absent gives def. */
mw_status mw_kget_num(const mw_klayer *L, const char *path, const json_t *obj, const char *key,
                      double def, double *out);

/* cfg[key]: a soft cap, null (or absent: 0, none) or a number > 0 (below 1e30). */
mw_status mw_kget_cap(const mw_klayer *L, const json_t *cfg, const char *key, double *out);

/* cfg[key] absent or null: the fields this program does not implement. */
mw_status mw_kneed_null(const mw_klayer *L, const json_t *cfg, const char *key, const char *why);

/* cfg[key]: one of names[] (case-insensitive, as Keras lower-cases these); absent or null
 * gives def. */
mw_status mw_kget_choice(const mw_klayer *L, const json_t *cfg, const char *key,
                         const char *const *names, int n, int def, const char *supported, int *out);

/* cfg[key] as ZeroPadding2D's padding or Cropping2D's cropping: n, [h, w] or [[top, bottom],
 * [left, right]], integers from 0 to MW_KMAX_WINDOW, into out (top, bottom, left, right);
 * absent or null gives def on every side. */
mw_status mw_kget_sides(const mw_klayer *L, const json_t *cfg, const char *key, int def,
                        int out[4]);

/* cfg["padding"]: "valid" (0) or "same" (1); absent gives valid. */
mw_status mw_kget_padding(const mw_klayer *L, const json_t *cfg, int *same);

/* cfg["data_format"]: absent, null or "channels_last". */
mw_status mw_kcheck_data_format(const mw_klayer *L, const json_t *cfg);

/* cfg[key]: an activation by its string identifier; absent or null gives linear, unless
 * required. */
mw_status mw_kget_activation(const mw_klayer *L, const json_t *cfg, const char *key, int is_last,
                             int required, mw_activation *out);

/* cfg[key]: {"class_name": ..., "config": {...}}, a string identifier ("he_normal"), or
 * absent / null for the default. */
mw_status mw_kget_init(const mw_klayer *L, const json_t *cfg, const char *key, mw_init_kind def,
                       mw_init *out);

/* Values per example of the last layer's output. */
size_t mw_klast_out(const mw_model *m);

/* Channels of the next layer's input: its first graph input, else the last layer. */
int mw_kcur_c(const mw_model *m);
/* The layer whose output is the next layer's (first) input: its first graph input in a
 * Functional model, the last layer in a Sequential one; NULL for the model's input. A layer's
 * acceptance reads its input through this, never through the layer before it in the list. */
const mw_layer *mw_kprev(const mw_model *m);

/* The weights' settings of Conv2D and Dense in cfg: activation, use_bias, initializers,
 * regularizers (constraints, activity regularizers and LoRA refused). */
mw_status mw_kread_weights(const mw_klayer *L, const json_t *cfg, int is_last, mw_kweights *w);
/* The same with the kernel's keys named <kernel>_initializer, _regularizer and _constraint
 * ("depthwise": DepthwiseConv2D's), and no lora_rank (the layers without LoRA). */
mw_status mw_kread_weights_as(const mw_klayer *L, const json_t *cfg, int is_last,
                              const char *kernel, mw_kweights *w);
/* A regularizer key's value (null: none), as mw_kread_weights reads the kernel's. */
mw_status mw_kget_regularizer(const mw_klayer *L, const json_t *cfg, const char *key,
                              mw_regularizer *out);

/* A window's sizes: a 2-D layer's pair (mw_kget_pair), or a 1-D layer's one integer (or a list
 * of 1) as {1, k}, its sequence being 1 x T here. */
mw_status mw_kget_dims(const mw_klayer *L, const json_t *cfg, const char *key, int def, int lo,
                       int hi, int one_d, int out[2]);

/* After the layer itself was added: its initializers and regularizers (the layer adds its folded
 * activation itself, mw_model_add_act). */
mw_status mw_kapply_weights(mw_kbuilder *B, const mw_kweights *w);

/* MW_OK unless the model's input is (None, H, W), not yet flattened, which has no channels
 * for a 2-D layer. */
mw_status mw_kneed_channels(const mw_kbuilder *B, const mw_klayer *L);

/* The initializer at cfg[key] must be the default kind (the moving statistics start at
 * zeros and ones: restored weights replace them, but a different start is a different
 * model). */
mw_status mw_kneed_init(const mw_klayer *L, const json_t *cfg, const char *key, mw_init_kind kind);

/* BatchNormalization's axis: -1, or the last axis written out (3 on images, 1 on flat). */
mw_status mw_kget_bn_axis(const mw_klayer *L, const json_t *cfg, int flat);

/* cfg["axis"] of a normalization over the last axis (LayerNormalization, GroupNormalization):
 * absent, null, -1, [-1], or the last axis' index for the next layer's input (1 flat, 2 a
 * sequence, 3 an image). */
mw_status mw_kget_last_axis(const mw_klayer *L, const json_t *cfg, const mw_kbuilder *B);

/* What LayerNormalization and GroupNormalization share: the last axis (mw_kget_last_axis),
 * epsilon (default 1e-3), center and scale (true), beta's and gamma's initializers (zeros,
 * ones); their regularizers and constraints must be null. */
typedef struct {
    double epsilon;
    int center, scale;
    mw_init beta, gamma;
} mw_knorm;
mw_status mw_kread_norm(const mw_klayer *L, const json_t *cfg, const mw_kbuilder *B, mw_knorm *out);

/* ---- writing a layer back to Keras 3 (mw_layer_ops.to_keras) ---- */

/* [a, b] */
json_t *mw_kw_pair(int a, int b);
/* An initializer or a regularizer as Keras 3 serializes it (NULL regularizer: json null). */
json_t *mw_kw_initializer(const mw_init *in);
json_t *mw_kw_regularizer(const mw_regularizer *r);
/* The activation Keras keeps inside Conv2D or Dense layer i: a folded layer after it and
 * before the next matmul layer (the model may have moved it past a MaxPooling2D, with which a
 * ReLU commutes). */
const char *mw_kw_folded_activation(const mw_model *m, int i);
/* Conv2D's and Dense's weights' part of the config: use_bias, initializers, regularizers. */
void mw_kw_weights(json_t *c, const mw_layer *l);

#endif
