/* Reading Keras' serialized configs; see kconfig.h. */
#include "worker/keras/kconfig.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mw_status mw_kc_bad(const mw_kc_loc *l, const char *key, const char *fmt, ...)
{
    char where[512];
    const char *sep = *l->path && key ? "." : "";
    if (*l->path || key)
        snprintf(where, sizeof where, "%s: %s%s%s", l->where, l->path, sep, key ? key : "");
    else
        snprintf(where, sizeof where, "%s", l->where);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_ECONFIG, where, fmt, ap);
    va_end(ap);
    return rc;
}

void mw_kc_sub(mw_kc_loc *dst, const mw_kc_loc *l, const char *key)
{
    dst->where = l->where;
    int n = snprintf(dst->path, sizeof dst->path, "%s%s%s", l->path, *l->path ? "." : "", key);
    if (n >= (int)sizeof dst->path) /* paths are a few keys deep: never, but stay terminated */
        dst->path[sizeof dst->path - 1] = '\0';
}

/* A JSON value for messages, short. */
const char *mw_kc_show(const json_t *v, char *buf, size_t len)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
    snprintf(buf, len, "%s", s ? s : "?");
    if (s && strlen(s) >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
    free(s);
    return buf;
}

/* cfg[key] as a number in [lo, hi] (ends excluded by LO_OPEN / HI_OPEN); absent: *out stays;
 * null: *out = 0 with NULL_OK (the option off), else an error. */
mw_status mw_kc_num(const mw_kc_loc *l, const json_t *cfg, const char *key, double lo, double hi,
                    unsigned flags, double *out)
{
    const json_t *v = json_object_get(cfg, key);
    char buf[64];
    if (!v)
        return MW_OK;
    if (json_is_null(v)) {
        if (!(flags & NULL_OK))
            return mw_kc_bad(l, key, "expected a number, got null");
        *out = 0.0;
        return MW_OK;
    }
    if (!json_is_number(v))
        return mw_kc_bad(l, key, "expected a number, got %s", mw_kc_show(v, buf, sizeof buf));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || ((flags & LO_OPEN) && x == lo) ||
        ((flags & HI_OPEN) && x == hi)) {
        char range[96];
        if (isinf(hi))
            snprintf(range, sizeof range, "%s %g", (flags & LO_OPEN) ? ">" : ">=", lo);
        else
            snprintf(range, sizeof range, "in %c%g, %g%c", (flags & LO_OPEN) ? '(' : '[', lo, hi,
                     (flags & HI_OPEN) ? ')' : ']');
        return mw_kc_bad(l, key, "expected a number %s, got %s", range,
                         mw_kc_show(v, buf, sizeof buf));
    }
    *out = x;
    return MW_OK;
}

mw_status mw_kc_bool(const mw_kc_loc *l, const json_t *cfg, const char *key, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    char buf[64];
    if (!v)
        return MW_OK;
    if (!json_is_boolean(v))
        return mw_kc_bad(l, key, "expected true or false, got %s", mw_kc_show(v, buf, sizeof buf));
    *out = json_is_true(v);
    return MW_OK;
}

/* Every key of cfg is in one of the NULL-terminated lists: a (common to the family, summed
 * up as common in messages) or b (the class's own). */
mw_status mw_kc_known(const mw_kc_loc *l, const json_t *cfg, const char *cls, const char *const *a,
                      const char *const *b, const char *common)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)cfg, key, v)
    {
        int ok = 0;
        for (const char *const *k = a; *k && !ok; k++)
            ok = strcmp(*k, key) == 0;
        for (const char *const *k = b; *k && !ok; k++)
            ok = strcmp(*k, key) == 0;
        if (!ok) {
            char list[384] = "";
            for (const char *const *k = b; *k; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s, ", *k);
            return mw_kc_bad(l, key, "unknown argument of %s (expected %s%s)", cls, list, common);
        }
    }
    return MW_OK;
}

/* The {"module", "class_name", "config", "registered_name"} wrapper: its class name and
 * config (NULL when absent). module, when given and not null, must be want_module. */
mw_status mw_kc_unwrap(const mw_kc_loc *l, const json_t *j, const char *want_module,
                       const char **cls, const json_t **cfg)
{
    char buf[64];
    if (!json_is_object(j))
        return mw_kc_bad(l, NULL,
                         "expected an object {\"class_name\": ..., \"config\": {...}}, got %s",
                         mw_kc_show(j, buf, sizeof buf));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)j, key, v)
    {
        if (strcmp(key, "class_name") != 0 && strcmp(key, "config") != 0 &&
            strcmp(key, "module") != 0 && strcmp(key, "registered_name") != 0)
            return mw_kc_bad(l, key,
                             "unknown key (expected module, class_name, config, "
                             "registered_name)");
    }
    const json_t *c = json_object_get(j, "class_name"), *m = json_object_get(j, "module");
    if (!json_is_string(c))
        return mw_kc_bad(l, "class_name", "expected a string, got %s",
                         c ? mw_kc_show(c, buf, sizeof buf) : "nothing");
    if (m && !json_is_null(m) &&
        (!json_is_string(m) || strcmp(json_string_value(m), want_module) != 0))
        return mw_kc_bad(l, "module", "expected \"%s\", got %s", want_module,
                         mw_kc_show(m, buf, sizeof buf));
    *cls = json_string_value(c);
    *cfg = json_object_get(j, "config");
    if (*cfg && !json_is_object(*cfg))
        return mw_kc_bad(l, "config", "expected an object, got %s",
                         mw_kc_show(*cfg, buf, sizeof buf));
    return MW_OK;
}
