/* What the readers share (worker/data/data_formats.h): arrays as a reader hands them over,
 * their checks and conversion into a data set, label conversion, and paths in a directory. Float
 * images are scanned once for NaN and infinities, a window at a time, each window dropped from this
 * process's page tables after it is scanned (MADV_DONTNEED on a file mapping keeps the page
 * cache), so the scan does not leave a mapped file resident. */
#include "worker/data/data_formats.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mapguard.h"

#define SCAN_WINDOW (64u << 20) /* bytes of float images scanned before they are dropped */

void mw_npy_array_init(mw_npy_array *a)
{
    memset(a, 0, sizeof *a);
}

void mw_npy_array_free(mw_npy_array *a)
{
    free(a->heap);
    if (a->map) {
        mw_mapguard_remove(a->map);
        munmap(a->map, a->map_nbytes);
    }
    mw_npy_array_init(a);
}

static const char *shape_str(const mw_npy_header *h, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < h->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %llu" : "%llu",
                              (unsigned long long)h->shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, h->ndim == 1 ? ",)" : ")");
    return buf;
}

mw_status mw_data_take_labels(int32_t *out, const uint8_t *src, size_t stride, char kind,
                              int itemsize, uint32_t count, int classes, const char *why,
                              const char *name, int *max_label)
{
    const int64_t limit = classes > 0 ? classes : MW_DATA_MAX_CLASSES;
    int64_t top = -1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *p = src + (size_t)i * stride;
        int64_t v;
        if (itemsize == 1) {
            v = kind == 'i' ? (int64_t)(int8_t)p[0] : (int64_t)p[0];
        } else {
            uint64_t u = 0;
            for (int b = itemsize - 1; b >= 0; b--)
                u = u << 8 | p[b];
            if (kind == 'i' && itemsize < 8 && (u >> (8 * itemsize - 1)) & 1)
                u |= ~UINT64_C(0) << (8 * itemsize); /* sign-extend */
            v = kind == 'u' && itemsize == 8 && u > INT64_MAX ? INT64_MAX : (int64_t)u;
        }
        if (v < 0 || v >= limit) {
            if (classes > 0)
                return mw_err(MW_EDATA, "%s: example %u has label %lld, expected 0..%d (%s)", name,
                              i, (long long)v, classes - 1, why);
            return mw_err(MW_EDATA, "%s: example %u has label %lld, expected a class index 0..%d",
                          name, i, (long long)v, MW_DATA_MAX_CLASSES - 1);
        }
        out[i] = (int32_t)v;
        if (v > top)
            top = v;
    }
    *max_label = (int)top;
    return MW_OK;
}

/* NaN or an infinity anywhere in count float32 values: the first one's error. A mapped array
 * is dropped from this process's pages window by window as it is scanned. */
static mw_status check_finite(const mw_npy_array *x, size_t count, uint64_t per_example,
                              const char *what)
{
    const size_t window = SCAN_WINDOW / sizeof(float);
    for (size_t at = 0; at < count; at += window) {
        size_t end = count - at < window ? count : at + window;
        for (size_t i = at; i < end; i++) {
            float v;
            memcpy(&v, x->data + i * sizeof v, sizeof v);
            if (!isfinite(v))
                return mw_err(
                    MW_EDATA, "%s: example %llu has %s at element %llu: %s must be finite", x->name,
                    (unsigned long long)(i / per_example), isnan(v) ? "NaN" : "an infinity",
                    (unsigned long long)(i % per_example), what);
        }
        if (x->map) {
            uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
            uintptr_t lo = (uintptr_t)(x->data + at * sizeof(float)) & ~(pg - 1);
            uintptr_t hi = (uintptr_t)(x->data + end * sizeof(float)) & ~(pg - 1);
            if (hi > lo)
                madvise((void *)lo, hi - lo, MADV_DONTNEED);
        }
    }
    return MW_OK;
}

/* Token ids (N, T): each an integer in [0, 2^24) (floats hold them exactly; the model's
 * Embedding checks its own input_dim, worker/session.c), or the first one outside is an error
 * naming the example and the position. A mapped array is dropped from this process's pages
 * window by window as it is scanned. */
static mw_status check_tokens(const mw_npy_array *x, size_t count, uint64_t per, int64_t *max)
{
    *max = 0;
    const int size = x->h.itemsize, sgn = x->h.kind == 'i';
    const size_t window = SCAN_WINDOW / (size_t)size;
    for (size_t at = 0; at < count; at += window) {
        const size_t end = count - at < window ? count : at + window;
        for (size_t i = at; i < end; i++) {
            const int64_t v = mw_token_at(x->data + i * (size_t)size, size, sgn);
            if (v < 0 || v >= (INT64_C(1) << 24))
                return mw_err(MW_EDATA,
                              "%s: example %llu has token id %lld at position %llu; expected "
                              "an id in 0..%d",
                              x->name, (unsigned long long)(i / per), (long long)v,
                              (unsigned long long)(i % per), (1 << 24) - 1);
            *max = v > *max ? v : *max;
        }
        if (x->map) {
            uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
            uintptr_t lo = (uintptr_t)(x->data + at * (size_t)size) & ~(pg - 1);
            uintptr_t hi = (uintptr_t)(x->data + end * (size_t)size) & ~(pg - 1);
            if (hi > lo)
                madvise((void *)lo, hi - lo, MADV_DONTNEED);
        }
    }
    return MW_OK;
}

static mw_status check_images(const mw_npy_array *x)
{
    const mw_npy_header *h = &x->h;
    char sh[160];
    /* tabular (N, F) float32, or token ids (N, T) of any integer type: (1, 1, F) */
    const int features = h->ndim == 2;
    if (h->ndim != 3 && h->ndim != 4 && !features)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': %s has %d dimensions; expected images "
                      "(N, H, W) or (N, H, W, C), float32 features (N, F) or integer token ids "
                      "(N, T)",
                      x->name, shape_str(h, sh, sizeof sh), h->ndim);
    if (features && h->kind != 'f' && h->kind != 'u' && h->kind != 'i')
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': a 2-D array of '%s'; expected float32 "
                      "features ('<f4') or integer token ids (uint8, uint16, int32, int64, ...)",
                      x->name, h->descr);
    if (!features &&
        !((h->kind == 'u' && h->itemsize == 1) || (h->kind == 'f' && h->itemsize == 4)))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': images of '%s'; expected uint8 ('|u1') or "
                      "float32 ('<f4')",
                      x->name, h->descr);
    if (features && h->kind == 'f' && h->itemsize != 4)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': features of '%s'; expected float32 ('<f4')",
                      x->name, h->descr);
    const uint64_t c = h->ndim == 4 ? h->shape[3] : features ? h->shape[1] : 1;
    const uint64_t hh = features ? 1 : h->shape[1], ww = features ? 1 : h->shape[2];
    if (h->shape[0] == 0 || h->shape[0] >= UINT32_MAX)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': %s holds %llu images; expected "
                      "1..%u",
                      x->name, shape_str(h, sh, sizeof sh), (unsigned long long)h->shape[0],
                      UINT32_MAX - 1);
    if (hh == 0 || ww == 0 || hh > MW_DATA_MAX_DIM || ww > MW_DATA_MAX_DIM || c == 0 ||
        c > MW_DATA_MAX_CHANNELS)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': %s %s; expected height and width 1..%u and "
                      "1..%u channels (features)",
                      x->name, features ? "features of" : "images of", shape_str(h, sh, sizeof sh),
                      MW_DATA_MAX_DIM, MW_DATA_MAX_CHANNELS);
    uint64_t nbytes = h->count * (uint64_t)h->itemsize;
    uint64_t limit = x->map ? MW_DATA_MAX_MAPPED : MW_DATA_MAX_NBYTES;
    if (nbytes > limit)
        return mw_err(MW_EDATA, "%s: %llu bytes of images, more than the limit %llu", x->name,
                      (unsigned long long)nbytes, (unsigned long long)limit);
    return MW_OK;
}

static mw_status check_labels(const mw_npy_array *y, const mw_npy_array *x)
{
    const mw_npy_header *h = &y->h;
    char sh[160];
    const int floats = h->kind == 'f' && h->itemsize == 4; /* targets (N,) or (N, K) */
    /* integer (N, T): a label per position of a sequence; (N, H, W): one per pixel */
    const int pixels = h->ndim == 3 && !floats && h->shape[1] >= 1 &&
                       h->shape[1] <= MW_DATA_MAX_DIM && h->shape[2] >= 1 &&
                       h->shape[2] <= MW_DATA_MAX_DIM;
    if (!(h->ndim == 1 || pixels ||
          (h->ndim == 2 && h->shape[1] >= 1 &&
           h->shape[1] <= (floats ? MW_DATA_MAX_TARGETS : MW_DATA_MAX_DIM))))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': labels of shape %s; expected (N,) or (N, 1) "
                      "class labels, (N, T) labels per position or (N, H, W) per pixel (T, H "
                      "and W up to %u), or float32 targets (N,) or (N, K)",
                      y->name, shape_str(h, sh, sizeof sh), MW_DATA_MAX_DIM);
    if (!((h->kind == 'u' && h->itemsize == 1) || floats ||
          (h->kind == 'i' && (h->itemsize == 4 || h->itemsize == 8))))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': labels of '%s'; expected uint8 ('|u1'), "
                      "int32 ('<i4') or int64 ('<i8') class labels, or float32 ('<f4') targets",
                      y->name, h->descr);
    if (floats && h->ndim == 2 && (h->shape[1] == 0 || h->shape[1] > MW_DATA_MAX_TARGETS))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': targets of shape %s; expected 1..%d values "
                      "per example",
                      y->name, shape_str(h, sh, sizeof sh), MW_DATA_MAX_TARGETS);
    if (h->shape[0] != x->h.shape[0])
        return mw_err(MW_EDATA, "%s has %llu images but %s has %llu labels: the counts must match",
                      x->name, (unsigned long long)x->h.shape[0], y->name,
                      (unsigned long long)h->shape[0]);
    return MW_OK;
}

/* Float32 targets (N,) or (N, K), each finite, into d->targets. */
static mw_status take_targets(mw_dataset *d, const mw_npy_array *y, uint32_t n)
{
    const int K = y->h.ndim == 2 ? (int)y->h.shape[1] : 1;
    MW_TRY(check_finite(y, (size_t)n * K, (uint64_t)K, "targets"));
    d->targets = malloc((size_t)n * K * sizeof *d->targets);
    if (!d->targets)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %u x %d targets", y->name, n, K);
    memcpy(d->targets, y->data, (size_t)n * K * sizeof *d->targets); /* little-endian host */
    d->target_width = K;
    return MW_OK;
}

static mw_status take_labels(mw_dataset *d, const mw_npy_array *y, uint32_t n, int classes,
                             int *max_label)
{
    /* per position: (N, T), or per pixel: (N, H, W) */
    const uint64_t T = y->h.ndim == 3   ? y->h.shape[1] * y->h.shape[2]
                       : y->h.ndim == 2 ? y->h.shape[1]
                                        : 1;
    if ((uint64_t)n * T >= UINT32_MAX || T > INT32_MAX)
        return mw_err(MW_EDATA, "%s: %u x %llu labels; expected fewer than 2^32", y->name, n,
                      (unsigned long long)T);
    d->labels = malloc((size_t)n * T * sizeof *d->labels);
    if (!d->labels)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %llu labels", y->name,
                      (unsigned long long)n * T);
    d->label_width = (int)T;
    d->label_rows = y->h.ndim == 3 ? (int)y->h.shape[1] : 0;
    char why[32];
    snprintf(why, sizeof why, "--classes %d", classes);
    return mw_data_take_labels(d->labels, y->data, (size_t)y->h.itemsize, y->h.kind, y->h.itemsize,
                               n * T, classes, why, y->name, max_label);
}

/* Sample weights one per example ((N,), (N, 1)), or one per position of labels per position
 * ((N, T) beside (N, T) labels, (N, H, W) beside (N, H, W)): the weights per example, 0 when
 * the shape is neither. */
static int weights_width(const mw_dataset *d, const mw_npy_header *h)
{
    if (h->ndim < 1 || h->shape[0] != d->count)
        return 0;
    if (h->ndim == 1 || (h->ndim == 2 && h->shape[1] == 1))
        return 1;
    const int P = d->label_width;
    if (P > 1 && h->ndim == 2 && !d->label_rows && h->shape[1] == (uint64_t)P)
        return P;
    if (P > 1 && h->ndim == 3 && d->label_rows && h->shape[1] == (uint64_t)d->label_rows &&
        h->shape[1] * h->shape[2] == (uint64_t)P)
        return P;
    return 0;
}

mw_status mw_data_take_weights(mw_dataset *d, const mw_npy_array *w)
{
    const mw_npy_header *h = &w->h;
    char sh[160];
    const int ww = weights_width(d, h);
    if (!ww)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': sample weights of shape %s; expected (%u,) "
                      "or (%u, 1), one per example%s",
                      w->name, shape_str(h, sh, sizeof sh), d->count, d->count,
                      d->label_width > 1 ? ", or one per label position, the labels' shape" : "");
    if (h->kind != 'f' || (h->itemsize != 4 && h->itemsize != 8))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': sample weights of '%s'; expected float32 "
                      "('<f4') or float64 ('<f8')",
                      w->name, h->descr);
    const size_t count = (size_t)d->count * (size_t)ww;
    d->weights = malloc(count * sizeof *d->weights + 1);
    if (!d->weights)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %zu weights", w->name, count);
    d->weight_width = ww;
    for (size_t i = 0; i < count; i++) {
        double v;
        if (h->itemsize == 8) {
            memcpy(&v, w->data + (size_t)i * 8, 8);
        } else {
            float f;
            memcpy(&f, w->data + (size_t)i * 4, 4);
            v = f;
        }
        char at[48] = "";
        if (ww > 1)
            snprintf(at, sizeof at, " at position %zu", i % (size_t)ww);
        if (!isfinite(v) || v < 0 || v > FLT_MAX)
            return mw_err(MW_EDATA,
                          "%s: example %zu has sample weight %g%s; expected a finite weight >= 0",
                          w->name, i / (size_t)ww, v, at);
        d->weights[i] = (float)v;
    }
    return MW_OK;
}

mw_status mw_data_from_arrays(mw_dataset *d, mw_npy_array *x, const mw_npy_array *y, int classes,
                              int *max_label)
{
    MW_TRY(check_images(x));
    MW_TRY(check_labels(y, x));
    const mw_npy_header *h = &x->h;
    const uint32_t n = (uint32_t)h->shape[0];
    const uint64_t per = h->count / n;
    if (h->kind == 'f')
        MW_TRY(check_finite(x, (size_t)h->count, per, "images"));
    else if (h->ndim == 2)
        MW_TRY(check_tokens(x, (size_t)h->count, per, &d->tok_max));
    *max_label = -1;
    if (y->h.kind == 'f')
        MW_TRY(take_targets(d, y, n));
    else
        MW_TRY(take_labels(d, y, n, classes, max_label));
    d->count = n;
    const int features = h->ndim == 2; /* float32 (N, F) or token ids (N, T): (1, 1, F) */
    d->rows = features ? 1 : (uint32_t)h->shape[1];
    d->cols = features ? 1 : (uint32_t)h->shape[2];
    d->channels = h->ndim == 4 ? (uint32_t)h->shape[3] : features ? (uint32_t)h->shape[1] : 1;
    d->type = h->kind == 'f' ? MW_IMAGES_F32 : h->ndim == 2 ? MW_IMAGES_TOKENS : MW_IMAGES_U8;
    d->tok_size = h->itemsize, d->tok_signed = h->kind == 'i';
    d->images = x->data;
    d->map = x->map;
    d->map_nbytes = x->map_nbytes;
    if (!x->map && x->heap != x->data) { /* the data lie inside the heap block: own a copy */
        size_t nbytes = (size_t)h->count * (size_t)h->itemsize;
        d->images = malloc(nbytes ? nbytes : 1);
        if (!d->images)
            return mw_err(MW_ENOMEM, "%s: cannot allocate %zu bytes", x->name, nbytes);
        memcpy(d->images, x->data, nbytes);
        free(x->heap);
    }
    x->heap = NULL, x->map = NULL, x->data = NULL; /* now d's */
    return MW_OK;
}

mw_status mw_data_join(char *out, size_t cap, const char *dir, const char *name)
{
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    int n = snprintf(out, cap, "%.*s/%s", (int)dlen, dir, name);
    if (n < 0 || (size_t)n >= cap)
        return mw_err(MW_EINVAL, "data directory %s: path too long", dir);
    return MW_OK;
}

int mw_data_has(const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    return mw_data_join(p, sizeof p, dir, name) == MW_OK && stat(p, &st) == 0;
}
