/* The layer table's rows, one per mw_layer_kind (worker/model/layer.h); the rows live in their
 * families' files under layers/. */
#include <stdio.h>
#include <string.h>

#include "worker/model/layer.h"
#include "worker/model/model.h"

extern const mw_layer_ops mw_layer_conv2d, mw_layer_maxpool, mw_layer_flatten, mw_layer_dense,
    mw_layer_relu, mw_layer_dropout, mw_layer_identity, mw_layer_batchnorm, mw_layer_avgpool,
    mw_layer_zeropad, mw_layer_add, mw_layer_multiply, mw_layer_concat, mw_layer_act,
    mw_layer_softmax, mw_layer_crop, mw_layer_embed, mw_layer_layernorm, mw_layer_mha,
    mw_layer_posemb;

static const mw_layer_ops *const rows[MW_LAYER_KINDS] = {
    [MW_LAYER_CONV2D] = &mw_layer_conv2d,     [MW_LAYER_MAXPOOL] = &mw_layer_maxpool,
    [MW_LAYER_FLATTEN] = &mw_layer_flatten,   [MW_LAYER_DENSE] = &mw_layer_dense,
    [MW_LAYER_RELU] = &mw_layer_relu,         [MW_LAYER_DROPOUT] = &mw_layer_dropout,
    [MW_LAYER_IDENTITY] = &mw_layer_identity, [MW_LAYER_BATCHNORM] = &mw_layer_batchnorm,
    [MW_LAYER_AVGPOOL] = &mw_layer_avgpool,   [MW_LAYER_ZEROPAD] = &mw_layer_zeropad,
    [MW_LAYER_ADD] = &mw_layer_add,           [MW_LAYER_MULTIPLY] = &mw_layer_multiply,
    [MW_LAYER_CONCAT] = &mw_layer_concat,     [MW_LAYER_ACT] = &mw_layer_act,
    [MW_LAYER_SOFTMAX] = &mw_layer_softmax,   [MW_LAYER_CROP] = &mw_layer_crop,
    [MW_LAYER_EMBED] = &mw_layer_embed,       [MW_LAYER_LAYERNORM] = &mw_layer_layernorm,
    [MW_LAYER_MHA] = &mw_layer_mha,           [MW_LAYER_POSEMB] = &mw_layer_posemb,
};

const mw_layer_ops *mw_layer_row(int kind)
{
    return (unsigned)kind < MW_LAYER_KINDS ? rows[kind] : NULL;
}

const mw_layer_ops *mw_layer_row_keras(const char *cls)
{
    for (int k = 0; k < MW_LAYER_KINDS; k++)
        for (int j = 0; rows[k] && j < MW_LAYER_KERAS_MAX && rows[k]->keras[j]; j++)
            if (!strcmp(rows[k]->keras[j], cls))
                return rows[k];
    return NULL;
}

const char *mw_layer_keras_list(void)
{
    static char list[1024];
    if (list[0])
        return list;
    size_t used = 0;
    for (int k = 0; k < MW_LAYER_KINDS; k++)
        for (int j = 0;
             rows[k] && j < MW_LAYER_KERAS_MAX && rows[k]->keras[j] && used < sizeof list; j++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     rows[k]->keras[j]);
    return list;
}
