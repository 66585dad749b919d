/* Models of several named inputs (x_train.<name> in a .npz): each InputLayer takes its part of
 * the model input's row; see keras_inputs.h.
 *
 * Why a file of its own: the parts are the data's, matched to the graph's InputLayers by name;
 * the graph's reading (keras_graph.c) calls this and nothing here calls back. */
#include "worker/keras/keras_inputs.h"

#include <stdio.h>
#include <string.h>

#include "worker/keras/keras_read.h"
#include "worker/model/keras_keys.h"
#include "worker/model/layers/input.h"

/* InputLayer name's (None, T) length: *t, or 0 when it is null (the data give it). */
static mw_status input_length(const mw_klayer *L, const json_t *cfg, int *t)
{
    mw_kdbuf d;
    const json_t *s = json_object_get(cfg, "batch_shape");
    if (!s)
        s = json_object_get(cfg, "batch_input_shape");
    *t = 0;
    if (!json_is_array(s) || json_array_size(s) != 2 ||
        !(json_is_null(json_array_get(s, 1)) ||
          mw_kas_int(json_array_get(s, 1), 1, MW_KMAX_DIM, t)))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "batch_shape: found %s; supported for one of several named inputs: "
                        "[null, steps] or [null, null] (a sequence of integers per example)",
                        mw_kdescribe(d, s));
    return MW_OK;
}

/* InputLayer name of a model of several named inputs: the layer taking its part of the input
 * row (layers/input.h); *idx its index. */
mw_status mw_keras_add_input(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                             const char *name, int *idx)
{
    mw_model *m = B->m;
    const mw_input_parts *p = &m->parts;
    MW_TRY(mw_keras_check_input_layer(L, cfg, 0));
    int t = 0, k = 0, off = 0;
    MW_TRY(input_length(L, cfg, &t));
    while (k < p->n && strcmp(p->name[k], name) != 0)
        off += p->width[k++];
    if (k == p->n) {
        char have[MW_MAX_MODEL_INPUTS * (MW_INPUT_NAME_MAX + 2)] = "";
        for (int j = 0; j < p->n; j++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", j ? ", " : "",
                     p->name[j]);
        return mw_kfail(L, MW_EDATA,
                        "the data have no input named like it (x_train.%s in a .npz); they "
                        "hold: %s",
                        name, have);
    }
    if (t && t != p->width[k])
        return mw_kfail(L, MW_EDATA,
                        "batch_shape (None, %d), but the data's x_train.%s has %d values per "
                        "example; expected the same length",
                        t, name, p->width[k]);
    mw_status rc = mw_model_add_input_part(m, name, off, p->width[k]);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    *idx = m->nlayers - 1;
    return MW_OK;
}

/* Without data (a summary, an export): the named inputs from the InputLayers' own lengths (or
 * those a training run recorded, lengths), in the order of their names as the data hold them. */
static mw_status file_parts(const char *origin, const json_t *layers, const json_t *lengths,
                            mw_input_parts *p)
{
    p->n = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        mw_klayer L = {origin, "", MW_POLICY_FLOAT32, NULL};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(mw_keras_read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (strcmp(cls, "InputLayer") != 0)
            continue;
        int t = 0;
        MW_TRY(input_length(&L, cfg, &t));
        const json_t *rec = name ? json_object_get(lengths, name) : NULL;
        if (!t && rec && !mw_kas_int(rec, 1, MW_KMAX_DIM, &t))
            return mw_kfail(&L, MW_EMODEL, "%s.%s: expected a length from 1 to %d",
                            MW_KERAS_LENGTHS_KEY, name, MW_KMAX_DIM);
        if (!t)
            return mw_kfail(&L, MW_EUNSUPPORTED,
                            "batch_shape (None, None): the length of a named input comes from "
                            "the data; give --data, or a length in the model");
        if (p->n == MW_MAX_MODEL_INPUTS || !name || strlen(name) >= MW_INPUT_NAME_MAX)
            return mw_kfail(&L, MW_EUNSUPPORTED,
                            "supported: up to %d named inputs, names of "
                            "up to %d bytes",
                            MW_MAX_MODEL_INPUTS, MW_INPUT_NAME_MAX - 1);
        snprintf(p->name[p->n], MW_INPUT_NAME_MAX, "%s", name);
        p->width[p->n++] = t;
    }
    mw_input_parts_sort(p);
    return MW_OK;
}

/* Every part of the data is an input of the model. */
mw_status mw_keras_check_parts_used(const mw_kbuilder *B)
{
    const mw_model *m = B->m;
    for (int k = 0; k < m->parts.n; k++) {
        int found = 0;
        for (int i = 0; i < m->nlayers && !found; i++)
            found =
                m->layers[i].kind == MW_LAYER_INPUT && !strcmp(m->layers[i].name, m->parts.name[k]);
        if (!found)
            return mw_keras_fail_at(B->origin, MW_EDATA,
                                    "the data's x_train.%s is not an input of the model; expected "
                                    "one array per InputLayer, named after it",
                                    m->parts.name[k]);
    }
    return MW_OK;
}

/* A model of several named inputs: the model's input is their row, each InputLayer (the
 * first, layers[0], here; the others as graph_layers meets them) takes its part. */
mw_status mw_keras_start_named(mw_kbuilder *B, const json_t *conf, const json_t *layers,
                               const int shape[3], int ninputs, const char **name0_out, int *idx0)
{
    mw_input_parts own;
    const mw_input_parts *p = B->parts;
    if (!p)
        MW_TRY(file_parts(B->origin, layers, B->lengths, &own));
    p = p ? p : &own;
    int total = 0;
    for (int k = 0; k < p->n; k++)
        total += p->width[k];
    if (shape[0] && (shape[0] != 1 || shape[1] != 1 || shape[2] != total))
        return mw_keras_fail_at(B->origin, MW_EDATA,
                                "the model takes %d named inputs, but the data are %dx%dx%d "
                                "values per example; expected arrays x_train.<input name> in a "
                                ".npz",
                                ninputs, shape[0], shape[1], shape[2]);
    mw_model_init(B->m, 1, 1, total);
    B->m->flat_input = 1;
    B->m->parts = *p;
    MW_TRY(mw_keras_set_model_name(B, conf));
    B->m->graph = 1;
    mw_klayer L0 = {B->origin, "", MW_POLICY_FLOAT32, NULL};
    const char *cls0 = NULL, *name0 = NULL;
    const json_t *cfg0 = NULL;
    MW_TRY(mw_keras_read_layer(&L0, json_array_get(layers, 0), 0, &cls0, &cfg0, &name0));
    if (!name0)
        return mw_kfail(&L0, MW_EMODEL, "name is missing; a Functional model names its layers");
    *name0_out = name0;
    return mw_keras_add_input(B, &L0, cfg0, name0, idx0);
}
