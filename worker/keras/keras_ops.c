/* Operations on one tensor in a Functional graph; see keras_ops.h.
 *
 * Why a file of its own: they are read from their call's arguments (the node), not from a
 * layer config through the layer table, and each builds a layer of an existing family. */
#include "worker/keras/keras_ops.h"

#include <string.h>

#include "worker/keras/keras_read.h"
#include "worker/model/layers/cropping.h"
#include "worker/model/layers/embedding.h"

static const json_t *node0(const json_t *e)
{
    return json_array_get(json_object_get(e, "inbound_nodes"), 0);
}

/* A ReversibleEmbedding's node called with reverse=True. */
static int reverse_node(const char *cls, const json_t *e)
{
    const json_t *node = node0(e);
    return !strcmp(cls, "ReversibleEmbedding") && json_is_object(node) &&
           json_is_true(json_object_get(json_object_get(node, "kwargs"), "reverse"));
}

int mw_keras_op_is(const char *cls, const json_t *e)
{
    return reverse_node(cls, e) || !strcmp(cls, "GetItem");
}

const json_t *mw_keras_op_input(const json_t *e)
{
    return json_array_get(json_object_get(node0(e), "args"), 0);
}

/* The reverse call: the table of the earlier layer of the same name (its forward call), used
 * transposed (layers/embedding.h mw_model_add_reverse_embedding). */
static mw_status reverse_call(mw_kbuilder *B, const mw_klayer *L, const json_t *e, const char *name)
{
    mw_kdbuf d;
    const json_t *node = node0(e);
    const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
    if (json_object_size(kw) != 1 || !json_is_array(args) || json_array_size(args) != 1)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes[0]: found %s; supported for the reverse call: one "
                        "tensor and the call argument reverse alone",
                        mw_kdescribe(d, node));
    int table = -1;
    for (int j = 0; j < B->m->nlayers; j++)
        if (B->m->layers[j].kind == MW_LAYER_EMBED && !strcmp(B->m->layers[j].name, name))
            table = j;
    mw_status rc = mw_model_add_reverse_embedding(B->m, name, table);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

/* A whole axis in a GetItem's index: {"class_name": "__slice__", "config": {start, stop, step
 * all null}}. */
static int whole_slice(const json_t *s)
{
    const json_t *c = json_object_get(s, "config");
    const char *cls = json_string_value(json_object_get(s, "class_name"));
    return cls && !strcmp(cls, "__slice__") && json_is_null(json_object_get(c, "start")) &&
           json_is_null(json_object_get(c, "stop")) && json_is_null(json_object_get(c, "step"));
}

/* Keras' GetItem (x[...] in a model's code): x[:, k, :] (or x[:, k]) of a sequence, one step
 * (layers/cropping.h); any other index is refused. */
static mw_status get_item(mw_kbuilder *B, const mw_klayer *L, const json_t *e, const char *name)
{
    mw_kdbuf d;
    const json_t *args = json_object_get(node0(e), "args"), *idx = json_array_get(args, 1);
    int k = 0;
    const size_t n = json_array_size(idx);
    if (json_array_size(args) != 2 || (n != 2 && n != 3) || !whole_slice(json_array_get(idx, 0)) ||
        (n == 3 && !whole_slice(json_array_get(idx, 2))) ||
        !mw_kas_int(json_array_get(idx, 1), -MW_KMAX_DIM, MW_KMAX_DIM, &k))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes[0].args: found %s; supported: x[:, k, :] or x[:, k], one "
                        "step of a sequence",
                        mw_kdescribe(d, args));
    mw_status rc = mw_model_add_take_step(B->m, name, k);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

mw_status mw_keras_op_add(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *e,
                          int in, const char *name)
{
    if (json_array_size(json_object_get(e, "inbound_nodes")) != 1)
        return mw_kfail(L, MW_EUNSUPPORTED, "inbound_nodes: expected one node (called once)");
    mw_status rc = mw_model_set_inputs(B->m, &in, 1);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    MW_TRY(reverse_node(cls, e) ? reverse_call(B, L, e, name) : get_item(B, L, e, name));
    B->m->layers[B->m->nlayers - 1].nest = B->nest;
    return MW_OK;
}
