/* Operations on one tensor in a Functional graph; see keras_ops.h.
 *
 * Why a file of its own: they are read from their call's arguments (the node), not from a
 * layer config through the layer table, and each builds a layer of an existing family. */
#include "worker/keras/keras_ops.h"

#include <stdio.h>
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

/* Index idx as Python writes it ("[:, 1:3]"), into buf (n bytes); "?" for a part that is
 * neither an integer, None nor a slice of them. */
static const char *show_index(const json_t *idx, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (size_t i = 0; i < json_array_size(idx) && len < n; i++) {
        const json_t *v = json_array_get(idx, i), *c = json_object_get(v, "config");
        const char *cls = json_string_value(json_object_get(v, "class_name"));
        char part[3][24] = {"", "", ""};
        const char *keys[] = {"start", "stop", "step"};
        for (int k = 0; k < 3; k++) {
            const json_t *x = cls ? json_object_get(c, keys[k]) : v;
            if (json_is_integer(x))
                snprintf(part[k], sizeof part[k], "%lld", (long long)json_integer_value(x));
            else if (!json_is_null(x))
                snprintf(part[k], sizeof part[k], "?");
        }
        const char *sep = i ? ", " : "";
        if (cls && !strcmp(cls, "__slice__"))
            len += (size_t)snprintf(buf + len, n - len, "%s%s:%s%s%s", sep, part[0], part[1],
                                    part[2][0] ? ":" : "", part[2]);
        else
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep,
                                    json_is_null(v) ? "None"
                                    : cls           ? "?"
                                                    : part[0]);
    }
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}

/* Keras' GetItem (x[...] in a model's code): x[:, k, :] (or x[:, k]) of a sequence, one step
 * (layers/cropping.h); any other index is refused. */
static mw_status get_item(mw_kbuilder *B, const mw_klayer *L, const json_t *e, const char *name)
{
    char shown[160];
    const json_t *args = json_object_get(node0(e), "args"), *idx = json_array_get(args, 1);
    int k = 0;
    const size_t n = json_array_size(idx);
    if (json_array_size(args) != 2 || (n != 2 && n != 3) || !whole_slice(json_array_get(idx, 0)) ||
        (n == 3 && !whole_slice(json_array_get(idx, 2))) ||
        !mw_kas_int(json_array_get(idx, 1), -MW_KMAX_DIM, MW_KMAX_DIM, &k))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes[0].args: the index x%s; supported: x[:, k, :] or x[:, k], "
                        "one step of a sequence",
                        json_is_array(idx) ? show_index(idx, shown, sizeof shown) : "(not a list)");
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
    mw_layer *l = &B->m->layers[B->m->nlayers - 1];
    l->nest = B->nest;
    /* The reverse call computes under its layer's dtype policy; GetItem, an operation with no
     * policy of its own (Keras writes none), in its input's dtype, as Keras' x[:, k] of a
     * bfloat16 tensor is bfloat16. */
    l->policy = reverse_node(cls, e) ? L->policy
                : in >= 0            ? B->m->layers[in].policy
                                     : MW_POLICY_FLOAT32;
    return MW_OK;
}

/* ---- a ReversibleEmbedding called twice ------------------------------------------------- */

/* 1 when entry e is one layer called twice: forward on node 0, then reverse=True on node 1
 * (how Keras writes emb(ids) and emb(h, reverse=True) of one ReversibleEmbedding). */
static int shared_reverse(const json_t *e)
{
    const char *cls = json_string_value(json_object_get(e, "class_name"));
    const json_t *nodes = json_object_get(e, "inbound_nodes");
    const json_t *k0 = json_object_get(json_array_get(nodes, 0), "kwargs");
    const json_t *k1 = json_object_get(json_array_get(nodes, 1), "kwargs");
    return cls && !strcmp(cls, "ReversibleEmbedding") && json_array_size(nodes) == 2 &&
           !json_is_true(json_object_get(k0, "reverse")) &&
           json_is_true(json_object_get(k1, "reverse"));
}

/* The rewrite of one shared entry named name: the list's index of the latest producer its
 * reverse call reads (at), and how many reads of its forward output come after it (late). */
typedef struct {
    const char *name;
    const json_t *layers;
    size_t at;
    int late;
} unshare;

/* Keras tensor t's keras_history ([layer, node, tensor]), or NULL when t is not one. */
static json_t *history(const json_t *t)
{
    const char *c = json_string_value(json_object_get(t, "class_name"));
    json_t *h = json_object_get(json_object_get(t, "config"), "keras_history");
    return c && !strcmp(c, "__keras_tensor__") && json_array_size(h) >= 3 ? h : NULL;
}

/* f on the keras_history of every Keras tensor in v, lists and objects searched. */
static void each_tensor(json_t *v, void (*f)(json_t *h, unshare *u), unshare *u)
{
    json_t *h = history(v), *x;
    size_t i;
    const char *k;
    if (h)
        f(h, u);
    else if (json_is_array(v))
        json_array_foreach(v, i, x) each_tensor(x, f, u);
    else if (json_is_object(v))
        json_object_foreach(v, k, x) each_tensor(x, f, u);
}

/* The reverse call's input: its producer's index in the list (the latest seen). */
static void producer(json_t *h, unshare *u)
{
    const char *p = json_string_value(json_array_get(h, 0));
    for (size_t j = 0; p && j < json_array_size(u->layers); j++) {
        const char *nm = json_string_value(json_object_get(json_array_get(u->layers, j), "name"));
        if (nm && !strcmp(p, nm) && j > u->at)
            u->at = j;
    }
}

/* A later entry's input: the reverse call's output [name, 1, t] becomes [name, 0, t], the
 * entry of its own; the forward call's [name, 0, t] there is noted (it would read the
 * reverse call). */
static void renumber(json_t *h, unshare *u)
{
    const char *p = json_string_value(json_array_get(h, 0));
    if (!p || strcmp(p, u->name) != 0)
        return;
    if (json_integer_value(json_array_get(h, 1)) == 1)
        json_array_set_new(h, 1, json_integer(0));
    else
        u->late++;
}

/* output_layers' references ([name, node, tensor], or a list of them) to the reverse call. */
static void renumber_outputs(json_t *ol, const char *name)
{
    const char *p = json_string_value(json_array_get(ol, 0));
    size_t i;
    json_t *x;
    if (p && !strcmp(p, name) && json_integer_value(json_array_get(ol, 1)) == 1)
        json_array_set_new(ol, 1, json_integer(0));
    else if (!p)
        json_array_foreach(ol, i, x) renumber_outputs(x, name);
}

/* Splits entry i of conf's layers (a shared ReversibleEmbedding named name) in two: the
 * forward call stays; the reverse call becomes an entry of its own of the same name right
 * after the latest layer it reads (the form mw_keras_op_add reads), which the later entries
 * and the outputs read as node 0. */
static mw_status split_shared(const char *origin, json_t *conf, size_t i, const char *name)
{
    json_t *layers = json_object_get(conf, "layers"), *e = json_array_get(layers, i);
    json_t *nodes = json_object_get(e, "inbound_nodes"), *rev = json_array_get(nodes, 1);
    unshare u = {name, layers, i, 0};
    each_tensor(rev, producer, &u);
    for (size_t j = u.at + 1; j < json_array_size(layers); j++) {
        json_t *later = json_array_get(layers, j);
        each_tensor(json_object_get(later, "inbound_nodes"), renumber, &u);
        const char *ln = json_string_value(json_object_get(later, "name"));
        mw_kqbuf q, r;
        if (u.late)
            return mw_keras_fail_at(
                origin, MW_EUNSUPPORTED,
                "layer %s (ReversibleEmbedding), called twice: layer %s reads its first call's "
                "output after its reverse call's input; supported: the first call's output read "
                "only before",
                mw_kquote(q, name), mw_kquote(r, ln ? ln : "?"));
    }
    renumber_outputs(json_object_get(conf, "output_layers"), name);
    json_t *own = json_pack("{s:s, s:s, s:{s:s}, s:[O]}", "class_name", "ReversibleEmbedding",
                            "name", name, "config", "name", name, "inbound_nodes", rev);
    const char *keep[] = {"module", "registered_name"};
    for (int k = 0; own && k < 2; k++)
        if (json_object_get(e, keep[k]))
            json_object_set(own, keep[k], json_object_get(e, keep[k]));
    /* the layer's dtype policy: the reverse call computes under it, as the forward call does */
    const json_t *dtype = json_object_get(json_object_get(e, "config"), "dtype");
    if (own && dtype)
        json_object_set(json_object_get(own, "config"), "dtype", (json_t *)dtype);
    if (!own || json_array_insert_new(layers, u.at + 1, own) != 0 ||
        json_array_remove(nodes, 1) != 0)
        return mw_keras_fail_at(origin, MW_ENOMEM, "out of memory");
    return MW_OK;
}

/* The shared ReversibleEmbeddings of conf's layers split (nested Functionals' too); *changed
 * set when one was. */
static mw_status split_all(const char *origin, json_t *conf, int *changed)
{
    json_t *layers = json_object_get(conf, "layers");
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *e = json_array_get(layers, i);
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (cls && !strcmp(cls, "Functional"))
            MW_TRY(split_all(origin, json_object_get(e, "config"), changed));
        else if (name && shared_reverse(e)) {
            MW_TRY(split_shared(origin, conf, i, name));
            *changed = 1;
        }
    }
    return MW_OK;
}

mw_status mw_keras_ops_unshare(const char *origin, const json_t *model, json_t **out)
{
    *out = NULL;
    int changed = 0;
    json_t *copy = json_deep_copy(model);
    if (!copy)
        return mw_keras_fail_at(origin, MW_ENOMEM, "out of memory");
    mw_status rc = split_all(origin, json_object_get(copy, "config"), &changed);
    if (rc == MW_OK && changed)
        *out = copy;
    else
        json_decref(copy);
    return rc;
}
