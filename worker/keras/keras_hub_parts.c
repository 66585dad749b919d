/* Pieces of a Functional model's config for KerasHub's task models; see keras_hub_parts.h. */
#include "worker/keras/keras_hub_parts.h"

#include <stdio.h>

json_t *mw_khub_tensor(const char *layer)
{
    return json_pack("{s:s, s:{s:[s, i, i]}}", "class_name", "__keras_tensor__", "config",
                     "keras_history", layer, 0, 0);
}

json_t *mw_khub_call(json_t *args, json_t *kwargs)
{
    return json_pack("[{s:o, s:o}]", "args", args, "kwargs", kwargs ? kwargs : json_object());
}

json_t *mw_khub_on(const char *layer)
{
    return mw_khub_call(json_pack("[o]", mw_khub_tensor(layer)), NULL);
}

int mw_khub_add(json_t *layers, const char *cls, int hub, const char *name, json_t *config,
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

int mw_khub_in_module(json_t *layers, const char *module)
{
    json_t *e = json_array_get(layers, json_array_size(layers) - 1);
    return e && json_object_set_new(e, "module", json_string(module)) == 0;
}

int mw_khub_input(json_t *layers, const char *name)
{
    json_t *e =
        json_pack("{s:s, s:s, s:{s:s, s:[n, n], s:s}, s:[]}", "class_name", "InputLayer", "name",
                  name, "config", "name", name, "batch_shape", "dtype", "int32", "inbound_nodes");
    return e && json_array_append_new(layers, e) == 0;
}

json_t *mw_khub_built(json_t *ls, int ok)
{
    if (ok)
        return ls;
    json_decref(ls);
    return NULL;
}

json_t *mw_khub_normal(double stddev)
{
    return json_pack("{s:s, s:{s:f, s:f, s:n}}", "class_name", "RandomNormal", "config", "mean",
                     0.0, "stddev", stddev, "seed");
}

json_t *mw_khub_truncated(double stddev)
{
    return json_pack("{s:s, s:{s:f, s:f, s:n}}", "class_name", "TruncatedNormal", "config", "mean",
                     0.0, "stddev", stddev, "seed");
}

json_t *mw_khub_layer_norm(double epsilon)
{
    return json_pack("{s:[i], s:f, s:b, s:b, s:b}", "axis", -1, "epsilon", epsilon, "center", 1,
                     "scale", 1, "rms_scaling", 0);
}

json_t *mw_khub_gelu_approximate(void)
{
    return json_pack("{s:s, s:s}", "class_name", "function", "config",
                     "keras_hub>gelu_approximate");
}
