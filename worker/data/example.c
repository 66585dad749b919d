/* tf.train.Example features by key (worker/data/example.h), over the parser protobuf-c
 * generates from worker/data/example.proto (the build's example.pb-c.c).
 *
 * protobuf-c's unpack copies what it parses into its own allocation, which mw_example owns and
 * frees; it refuses malformed wire data (a length past the end, a bad wire type, a varint
 * over 10 bytes) by returning NULL, which is the "does not parse" error. Packed and unpacked
 * repeated scalars both parse, as in TensorFlow's own parser. */
#include "worker/data/example.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.pb-c.h"

struct mw_example {
    Mwpb__Example *pb;
    char where[512];
};

const char *mw_example_kind_name(mw_example_kind k)
{
    switch (k) {
    case MW_EXAMPLE_BYTES:
        return "bytes list";
    case MW_EXAMPLE_FLOAT:
        return "float list";
    case MW_EXAMPLE_INT64:
        return "int64 list";
    default:
        return "feature with no list";
    }
}

static mw_status ex_err(const mw_example *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static mw_status ex_err(const mw_example *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_EDATA, e->where, fmt, ap);
    va_end(ap);
    return rc;
}

mw_status mw_example_parse(mw_example **out, const uint8_t *bytes, size_t nbytes, const char *where)
{
    *out = NULL;
    mw_example *e = calloc(1, sizeof *e);
    if (!e)
        return mw_err(MW_ENOMEM, "%s: out of memory for an example", where);
    snprintf(e->where, sizeof e->where, "%s", where);
    e->pb = mwpb__example__unpack(NULL, nbytes, bytes);
    if (!e->pb) {
        mw_status rc = ex_err(e,
                              "not a tf.train.Example (the protobuf does not parse, %zu bytes); "
                              "expected a serialized Example in each record",
                              nbytes);
        free(e);
        return rc;
    }
    *out = e;
    return MW_OK;
}

void mw_example_free(mw_example *e)
{
    if (!e)
        return;
    mwpb__example__free_unpacked(e->pb, NULL);
    free(e);
}

size_t mw_example_count(const mw_example *e)
{
    return e->pb->features ? e->pb->features->n_feature : 0;
}

static const Mwpb__Feature *feature(const mw_example *e, size_t i)
{
    return e->pb->features->feature[i]->value;
}

static mw_example_kind kind_of(const Mwpb__Feature *f, size_t *count)
{
    *count = 0;
    if (!f)
        return MW_EXAMPLE_NONE;
    switch (f->kind_case) {
    case MWPB__FEATURE__KIND_BYTES_LIST:
        *count = f->bytes_list->n_value;
        return MW_EXAMPLE_BYTES;
    case MWPB__FEATURE__KIND_FLOAT_LIST:
        *count = f->float_list->n_value;
        return MW_EXAMPLE_FLOAT;
    case MWPB__FEATURE__KIND_INT64_LIST:
        *count = f->int64_list->n_value;
        return MW_EXAMPLE_INT64;
    default:
        return MW_EXAMPLE_NONE;
    }
}

const char *mw_example_key(const mw_example *e, size_t i, mw_example_kind *kind, size_t *count)
{
    *kind = kind_of(feature(e, i), count);
    return e->pb->features->feature[i]->key;
}

const uint8_t *mw_example_bytes_at(const mw_example *e, size_t i, size_t j, size_t *nbytes)
{
    const ProtobufCBinaryData *v = &feature(e, i)->bytes_list->value[j];
    *nbytes = v->len;
    return v->data;
}

const float *mw_example_floats_at(const mw_example *e, size_t i)
{
    const Mwpb__Feature *f = feature(e, i);
    return f && f->kind_case == MWPB__FEATURE__KIND_FLOAT_LIST ? f->float_list->value : NULL;
}

const int64_t *mw_example_int64s_at(const mw_example *e, size_t i)
{
    const Mwpb__Feature *f = feature(e, i);
    return f && f->kind_case == MWPB__FEATURE__KIND_INT64_LIST ? f->int64_list->value : NULL;
}

/* The keys of e, comma-separated, for "no feature" messages. */
static void list_keys(const mw_example *e, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < mw_example_count(e) && used + 1 < cap; i++) {
        int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "",
                         e->pb->features->feature[i]->key);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used + 1 >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
}

/* The last feature named key, of kind want with at least one value: its index in *i. */
static mw_status find(const mw_example *e, const char *key, mw_example_kind want, size_t *i)
{
    size_t n = mw_example_count(e), count = 0;
    for (size_t k = n; k-- > 0;) {
        if (strcmp(e->pb->features->feature[k]->key, key) != 0)
            continue;
        mw_example_kind got = kind_of(feature(e, k), &count);
        if (got != want)
            return ex_err(e, "feature '%s' is %s %s; expected %s %s", key,
                          got == MW_EXAMPLE_INT64 ? "an" : "a", mw_example_kind_name(got),
                          want == MW_EXAMPLE_INT64 ? "an" : "a", mw_example_kind_name(want));
        if (count == 0)
            return ex_err(e, "feature '%s' is an empty %s; expected at least one value", key,
                          mw_example_kind_name(want));
        *i = k;
        return MW_OK;
    }
    char keys[256];
    list_keys(e, keys, sizeof keys);
    return ex_err(e, "no feature '%s' (features: %s); expected %s %s named so", key,
                  n ? keys : "none", want == MW_EXAMPLE_INT64 ? "an" : "a",
                  mw_example_kind_name(want));
}

mw_status mw_example_bytes(const mw_example *e, const char *key, const uint8_t **data,
                           size_t *nbytes)
{
    size_t i;
    MW_TRY(find(e, key, MW_EXAMPLE_BYTES, &i));
    *data = mw_example_bytes_at(e, i, 0, nbytes);
    return MW_OK;
}

mw_status mw_example_int64s(const mw_example *e, const char *key, const int64_t **values,
                            size_t *count)
{
    size_t i;
    MW_TRY(find(e, key, MW_EXAMPLE_INT64, &i));
    *values = mw_example_int64s_at(e, i);
    *count = feature(e, i)->int64_list->n_value;
    return MW_OK;
}

mw_status mw_example_floats(const mw_example *e, const char *key, const float **values,
                            size_t *count)
{
    size_t i;
    MW_TRY(find(e, key, MW_EXAMPLE_FLOAT, &i));
    *values = mw_example_floats_at(e, i);
    *count = feature(e, i)->float_list->n_value;
    return MW_OK;
}
