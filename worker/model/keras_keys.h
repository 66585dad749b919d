/* Every key of a Keras config is accounted for: a reader lists, in one static table beside it,
 * each key Keras writes for the class it reads, as read (the reader checks its value), accepted
 * only at its default (any other value is refused by name), or ignored because it does not
 * change what is computed (with the reason). mw_kcheck_keys refuses any key the table does not
 * list, so a key a later Keras adds cannot pass unnoticed: the message names the layer, the key
 * and its value. */
#ifndef MW_WORKER_MODEL_KERAS_KEYS_H
#define MW_WORKER_MODEL_KERAS_KEYS_H

#include <jansson.h>

#include "common/status.h"

/* What a key is to its reader. */
typedef enum {
    MW_KEY_READ,    /* the reader reads it and checks its value */
    MW_KEY_DEFAULT, /* accepted only at one of its default values (arg) */
    MW_KEY_IGNORED, /* does not change the math (arg: why) */
} mw_kkey_kind;

/* One row of a reader's key table; a table ends with a row whose key is NULL. */
typedef struct {
    const char *key;
    mw_kkey_kind kind;
    /* MW_KEY_DEFAULT: the accepted values as JSON texts separated by '|' ("null|false"), the
     * first one Keras' default; MW_KEY_IGNORED: the reason; MW_KEY_READ: NULL */
    const char *arg;
    /* MW_KEY_DEFAULT: what another value would ask for, for the message ("a gated attention
     * output"); else NULL */
    const char *what;
} mw_kkey;

/* Rows: read; accepted at one of the '|'-separated JSON values v (what another value asks for);
 * ignored (why); the end of the table. */
#define MW_KREAD(k)                                                                                \
    {                                                                                              \
        k, MW_KEY_READ, NULL, NULL                                                                 \
    }
#define MW_KDEF(k, v, what)                                                                        \
    {                                                                                              \
        k, MW_KEY_DEFAULT, v, what                                                                 \
    }
#define MW_KIGN(k, why)                                                                            \
    {                                                                                              \
        k, MW_KEY_IGNORED, why, NULL                                                               \
    }
#define MW_KEND                                                                                    \
    {                                                                                              \
        NULL, MW_KEY_READ, NULL, NULL                                                              \
    }

/* The keys mw_kread_weights reads (Conv2D's, Dense's, MultiHeadAttention's weights). */
#define MW_KWEIGHT_KEYS                                                                            \
    MW_KREAD("activation"), MW_KREAD("use_bias"), MW_KREAD("kernel_initializer"),                  \
        MW_KREAD("bias_initializer"), MW_KREAD("kernel_regularizer"),                              \
        MW_KREAD("bias_regularizer"), MW_KREAD("activity_regularizer"),                            \
        MW_KREAD("kernel_constraint"), MW_KREAD("bias_constraint"), MW_KREAD("lora_rank"),         \
        MW_KIGN("lora_alpha", "LoRA's scale, used only with a lora_rank, which must be null")

/* The keys mw_kread_norm reads (LayerNormalization's and GroupNormalization's). */
#define MW_KNORM_KEYS                                                                              \
    MW_KREAD("axis"), MW_KREAD("epsilon"), MW_KREAD("center"), MW_KREAD("scale"),                  \
        MW_KREAD("beta_initializer"), MW_KREAD("gamma_initializer"), MW_KREAD("beta_regularizer"), \
        MW_KREAD("gamma_regularizer"), MW_KREAD("beta_constraint"), MW_KREAD("gamma_constraint")

/* The marker of an unknown key's message (tests look for it). */
#define MW_KKEY_UNKNOWN "is not a key mwtrain knows"

/* Every key of cfg is in table (or, with layer, one every layer has: name, trainable, dtype,
 * the first layer's input shape, which the model reader reads), and every MW_KEY_DEFAULT key is
 * absent or at one of its values. Otherwise MW_EUNSUPPORTED "origin: where: ..." naming the
 * key and its value; cls names the class in an unknown key's message. A layer reader passes
 * its mw_klayer's origin and where (worker/model/kread.h). */
mw_status mw_kcheck_keys(const char *origin, const char *where, const char *cls, const json_t *cfg,
                         const mw_kkey *table, int layer);

/* The same for a config that is not a layer's: at names it in the messages, its last ": "
 * part the place ("model.keras: config.json: compile_config"); no common keys. */
mw_status mw_kcheck_config_keys(const char *at, const char *cls, const json_t *cfg,
                                const mw_kkey *table);

#endif
