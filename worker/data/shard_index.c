/* A shard's record offsets and labels kept between runs (see shard_index.h). */
#include "worker/data/shard_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/fs.h"
#include "common/log.h"

#define MAGIC "MWTFREX1"
#define MAX_FILE (UINT64_C(1) << 34) /* 1 G records */

void mw_shard_index_init(mw_shard_index *x)
{
    memset(x, 0, sizeof *x);
}

void mw_shard_index_free(mw_shard_index *x)
{
    free(x->off);
    free(x->label);
    mw_shard_index_init(x);
}

mw_status mw_shard_index_add(mw_shard_index *x, uint64_t off, int64_t label, uint64_t nbytes,
                             const char *shard)
{
    if (x->n == x->cap) {
        const uint64_t c = x->cap ? 2 * x->cap : 1024;
        uint64_t *o = realloc(x->off, c * sizeof *o);
        if (o)
            x->off = o;
        int64_t *l = o ? realloc(x->label, c * sizeof *l) : NULL;
        if (!l)
            return mw_err(MW_ENOMEM, "%s: out of memory for its index (%llu records)", shard,
                          (unsigned long long)c);
        x->label = l, x->cap = c;
    }
    x->off[x->n] = off, x->label[x->n++] = label;
    x->largest = nbytes > x->largest ? nbytes : x->largest;
    return MW_OK;
}

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A key at *at of the n bytes b into out; 0 when it does not fit. */
static int take_key(const uint8_t *b, size_t n, size_t *at, char *out)
{
    if (*at + 4 > n)
        return 0;
    const uint64_t k = get(b + *at, 4);
    if (k > MW_SHARD_KEY_MAX || *at + 4 + k > n)
        return 0;
    memcpy(out, b + *at + 4, k);
    out[k] = '\0';
    *at += 4 + k;
    return 1;
}

/* A key the caller accepts: the flag's, or without one either default. */
static int key_ok(const char *stored, const char *want, const char *d1, const char *d2)
{
    return want ? strcmp(stored, want) == 0 : strcmp(stored, d1) == 0 || strcmp(stored, d2) == 0;
}

int mw_shard_index_load(mw_shard_index *x, const char *path, const char *image_key,
                        const char *label_key)
{
    char *text;
    size_t n;
    if (mw_fs_read_input(path, NULL, MAX_FILE, MW_EDATA, &text, &n) != MW_OK) {
        mw_err_clear();
        return 0;
    }
    const uint8_t *b = (const uint8_t *)text;
    size_t at = 24;
    int ok = n >= 28 && memcmp(b, MAGIC, 8) == 0 && get(b + n - 4, 4) == mw_crc32c(0, b, n - 4) &&
             take_key(b, n - 4, &at, x->image_key) && take_key(b, n - 4, &at, x->label_key) &&
             key_ok(x->image_key, image_key, "image/encoded", "image") &&
             key_ok(x->label_key, label_key, "image/class/label", "label");
    const uint64_t records = ok ? get(b + 8, 8) : 0;
    ok = ok && records <= (n - 4 - at) / 16 && at + 16 * records == n - 4;
    for (uint64_t i = 0; ok && i < records; i++)
        ok = mw_shard_index_add(x, get(b + at + 16 * i, 8), (int64_t)get(b + at + 16 * i + 8, 8), 0,
                                path) == MW_OK;
    if (ok)
        x->largest = get(b + 16, 8);
    free(text);
    if (!ok)
        mw_shard_index_free(x), mw_err_clear();
    return ok;
}

void mw_shard_index_save(const mw_shard_index *x, const char *path)
{
    const size_t k1 = strlen(x->image_key), k2 = strlen(x->label_key);
    const size_t n = 24 + 4 + k1 + 4 + k2 + 16 * (size_t)x->n + 4;
    uint8_t *b = malloc(n);
    if (!b)
        return;
    memcpy(b, MAGIC, 8);
    put(b + 8, x->n, 8);
    put(b + 16, x->largest, 8);
    size_t at = 24;
    put(b + at, k1, 4), memcpy(b + at + 4, x->image_key, k1), at += 4 + k1;
    put(b + at, k2, 4), memcpy(b + at + 4, x->label_key, k2), at += 4 + k2;
    for (uint64_t i = 0; i < x->n; i++, at += 16)
        put(b + at, x->off[i], 8), put(b + at + 8, (uint64_t)x->label[i], 8);
    put(b + at, mw_crc32c(0, b, at), 4);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : path;
    if (slash)
        *slash = '\0';
    if (mw_fs_mkdir_p(slash ? dir : ".", "the shard cache") != MW_OK ||
        mw_fs_write_atomic(slash ? dir : ".", name, b, n, "a shard's index") != MW_OK) {
        mw_log_debug("%s (the shard is read again next time)", mw_err_msg());
        mw_err_clear();
    }
    free(b);
}
