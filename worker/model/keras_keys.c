/* The key tables of the Keras readers: every key read, at its default, or refused by name;
 * see keras_keys.h. */
#include "worker/model/keras_keys.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strfmt.h"

#define QUOTE_MAX 48 /* bytes of a key or a value quoted in a message */

/* Keys every layer entry may carry, which the model reader (worker/keras/keras.c) reads for
 * every class: its name, trainable, its dtype policy, and the input shape Keras 2 writes on a
 * Sequential model's first layer. */
static const mw_kkey common_keys[] = {
    {"name", MW_KEY_READ, NULL, NULL},        {"trainable", MW_KEY_READ, NULL, NULL},
    {"dtype", MW_KEY_READ, NULL, NULL},       {"batch_input_shape", MW_KEY_READ, NULL, NULL},
    {"batch_shape", MW_KEY_READ, NULL, NULL}, {NULL, MW_KEY_READ, NULL, NULL},
};

/* Two JSON values are the same value: numbers by value (Keras writes 0 and 0.0 alike), lists
 * and objects member by member. */
static int same_value(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_value(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        const json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach((json_t *)a, k, v)
        {
            if (!same_value(v, json_object_get(b, k)))
                return 0;
        }
        return 1;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

/* v is one of the '|'-separated JSON texts in accepted. */
static int accepted(const json_t *v, const char *accepted)
{
    char buf[256];
    for (const char *p = accepted; *p;) {
        size_t n = strcspn(p, "|");
        if (n < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            json_t *want = json_loads(buf, JSON_DECODE_ANY, NULL);
            const int ok = want && same_value(v, want);
            json_decref(want);
            if (ok)
                return 1;
        }
        p += n + (p[n] == '|');
    }
    return 0;
}

static const mw_kkey *find_key(const mw_kkey *table, const char *key)
{
    for (const mw_kkey *k = table; k && k->key; k++)
        if (!strcmp(k->key, key))
            return k;
    return NULL;
}

/* The accepted values for a message: "false" or "null or false". */
static void list_accepted(char *buf, size_t n, const char *acc)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const char *p = acc; *p && used < n;) {
        size_t len = strcspn(p, "|");
        const char *sep = !used ? "" : p[len] ? ", " : " or ";
        used += (size_t)snprintf(buf + used, n - used, "%s%.*s", sep, (int)len, p);
        p += len + (p[len] == '|');
    }
}

/* v as compact JSON, control bytes escaped and shortened, for messages. */
static const char *show(char *buf, size_t n, const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
    mw_str_escape(buf, n, s ? s : "?", QUOTE_MAX, 0);
    free(s);
    return buf;
}

static mw_status fail(const char *origin, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mw_status fail(const char *origin, const char *where, const char *fmt, ...)
{
    char at[1024];
    snprintf(at, sizeof at, "%s: %s", origin, where);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_EUNSUPPORTED, at, fmt, ap);
    va_end(ap);
    return rc;
}

/* The check of one key against table (common: the layers' keys, or NULL). */
static mw_status check_key(const char *origin, const char *where, const char *cls, const char *key,
                           const json_t *v, const mw_kkey *table, const mw_kkey *common)
{
    char d[QUOTE_MAX * 4 + 8], q[QUOTE_MAX * 4 + 8], list[256];
    const mw_kkey *k = find_key(table, key);
    if (!k)
        k = find_key(common, key);
    if (!k)
        return fail(origin, where,
                    "%s (found %s) " MW_KKEY_UNKNOWN
                    " for %s (a newer Keras, or a custom argument?): not supported",
                    mw_str_quote(q, sizeof q, key, QUOTE_MAX), show(d, sizeof d, v), cls);
    if (k->kind != MW_KEY_DEFAULT || accepted(v, k->arg))
        return MW_OK;
    list_accepted(list, sizeof list, k->arg);
    return fail(origin, where, "%s: found %s; %s is not supported (supported: %s)", key,
                show(d, sizeof d, v), k->what ? k->what : "another value", list);
}

mw_status mw_kcheck_keys(const char *origin, const char *where, const char *cls, const json_t *cfg,
                         const mw_kkey *table, int layer)
{
    const char *key;
    const json_t *v;
    if (!json_is_object(cfg))
        return MW_OK; /* the reader says what it expected */
    json_object_foreach((json_t *)cfg, key, v)
    {
        MW_TRY(check_key(origin, where, cls, key, v, table, layer ? common_keys : NULL));
    }
    return MW_OK;
}

mw_status mw_kcheck_config_keys(const char *at, const char *cls, const json_t *cfg,
                                const mw_kkey *table)
{
    char origin[512];
    snprintf(origin, sizeof origin, "%s", at);
    char *sep = NULL;
    for (char *p = strstr(origin, ": "); p; p = strstr(p + 2, ": "))
        sep = p;
    if (!sep)
        return mw_kcheck_keys(at, cls, cls, cfg, table, 0);
    *sep = '\0';
    return mw_kcheck_keys(origin, sep + 2, cls, cfg, table, 0);
}
