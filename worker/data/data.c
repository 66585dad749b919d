/* The data set (see data.h): its life cycle, batch assembly and the epoch order. --data's
 * recognition of a format is in data_open.c, the readers in data_idx.c, data_npy.c,
 * data_npz.c and data_cifar.c. */
#include "worker/data/data.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/mapguard.h"
#include "common/rng.h"
#include "worker/data/prefetch.h"
#include "worker/data/preprocess.h"
#include "worker/data/stream.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void mw_dataset_init(mw_dataset *d)
{
    memset(d, 0, sizeof *d);
    d->images = NULL;
    d->labels = NULL;
    d->map = NULL;
}

void mw_dataset_free(mw_dataset *d)
{
    if (d->map) {
        mw_mapguard_remove(d->map);
        munmap(d->map, d->map_nbytes);
    } else
        free(d->images);
    free(d->labels);
    free(d->targets);
    free(d->weights);
    free(d->mask_w);
    free(d->valid);
    mw_prefetch_free(d->prefetch); /* before the stream it decodes */
    mw_stream_free(d->stream);
    mw_dataset_init(d);
}

size_t mw_dataset_target_nbytes(const mw_dataset *d)
{
    return d->targets ? (size_t)d->target_width * sizeof(float)
                      : sizeof(int32_t) * (size_t)(d->label_width > 1 ? d->label_width : 1);
}

mw_status mw_dataset_labels_as_targets(mw_dataset *d, const char *what)
{
    if (d->targets || d->count == 0)
        return MW_OK;
    if (d->label_width > 1)
        return mw_err(MW_EDATA,
                      "%s: labels per position (N, %d) go with SparseCategoricalCrossentropy; "
                      "a loss of float targets takes (N, K) float32",
                      what, d->label_width);
    float *t = malloc((size_t)d->count * sizeof *t);
    if (!t)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %u targets", what, d->count);
    for (uint32_t i = 0; i < d->count; i++)
        t[i] = (float)d->labels[i];
    free(d->labels);
    d->labels = NULL;
    d->targets = t, d->target_width = 1;
    return MW_OK;
}

int mw_dataset_unseen_classes(const mw_dataset *train, const mw_dataset *test, const char *path,
                              int classes_given, char *note, size_t cap)
{
    note[0] = '\0';
    const int nc = train->num_classes;
    if (nc < 1 || !train->labels)
        return 0;
    unsigned char *seen = calloc((size_t)nc, 1);
    if (!seen)
        return 0; /* a warning is not worth failing for */
    int32_t top_train = -1, top_test = -1;
    const size_t wtr = train->label_width > 1 ? (size_t)train->label_width : 1;
    const size_t wte = test && test->label_width > 1 ? (size_t)test->label_width : 1;
    for (size_t i = 0; i < (size_t)train->count * wtr; i++) {
        const int32_t y = train->labels[i];
        if (y >= 0 && y < nc)
            seen[y] = 1;
        top_train = y > top_train ? y : top_train;
    }
    for (size_t i = 0; test && test->labels && i < (size_t)test->count * wte; i++)
        top_test = test->labels[i] > top_test ? test->labels[i] : top_test;
    int unseen = 0;
    for (int c = 0; c < nc; c++)
        unseen += !seen[c];
    free(seen);
    if (!unseen)
        return 0;
    if (classes_given)
        snprintf(note, cap,
                 "data %s: %d of the %d classes (--classes %d) have no training example: the "
                 "model cannot learn them",
                 path, unseen, nc, nc);
    else
        snprintf(note, cap,
                 "data %s: %d of the %d classes have no training example: the class count is "
                 "the largest label + 1, and the largest is %d, in the %s set (a stray "
                 "label?); the model cannot learn the empty classes (fix the labels, or give "
                 "--classes N if that many is meant)",
                 path, unseen, nc, top_test > top_train ? top_test : top_train,
                 top_test > top_train ? "test" : "training");
    return unseen;
}

size_t mw_dataset_image_nbytes(const mw_dataset *d)
{
    const size_t item = d->type == MW_IMAGES_F32 || d->type == MW_IMAGES_ENCODED ? 4u
                        : d->type == MW_IMAGES_TOKENS ? (size_t)d->tok_size
                                                      : 1u;
    return (size_t)d->rows * d->cols * d->channels * item;
}

/* A mapped set: drop the pages around the n examples just read from this process's page
 * tables (the page cache keeps them). A read fault maps a whole page-cache folio, up to 2 MiB,
 * not only the example's page, so without this a rank's RSS would grow towards the file size
 * as the epochs visit every example; the window dropped is the folio-sized one around each
 * example. Safe while other threads read there: they fault the same bytes back in. */
static void release_pages(const mw_dataset *d, const uint32_t *ids, int n, size_t nbytes)
{
    const uintptr_t W = UINT64_C(2) << 20, base = (uintptr_t)d->map;
    const uintptr_t end = base + d->map_nbytes;
    uintptr_t done_lo = 0, done_hi = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t at = (uintptr_t)(d->images + (size_t)ids[i] * nbytes);
        uintptr_t lo = at & ~(W - 1), hi = (at + nbytes + W - 1) & ~(W - 1);
        lo = lo < base ? base : lo;
        hi = hi > end ? end : hi;
        if (lo >= done_lo && hi <= done_hi)
            continue;
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        done_lo = lo, done_hi = hi;
    }
}

/* Example id as floats (H, W, C) into dst: uint8 values / 255 (raw: as they are), float32 as
 * stored. */
static void assemble(const mw_dataset *d, float *dst, uint32_t id, size_t nbytes, int raw)
{
    const size_t hw = (size_t)d->rows * d->cols, C = d->channels, count = hw * C;
    assert(id < d->count);
    if (d->type == MW_IMAGES_ENCODED) { /* a failure is kept for mw_dataset_status */
        (void)(d->prefetch ? mw_prefetch_take(d->prefetch, dst, id, raw)
                           : mw_stream_decode(d->stream, dst, id, raw));
        return;
    }
    const uint8_t *src = d->images + (size_t)id * nbytes;
    if (d->type == MW_IMAGES_F32) /* little-endian like the host (data.h); maybe unaligned */
        memcpy(dst, src, count * sizeof *dst);
    else if (d->type == MW_IMAGES_TOKENS)
        for (size_t j = 0; j < count; j++)
            dst[j] = (float)mw_token_at(src + j * (size_t)d->tok_size, d->tok_size, d->tok_signed);
    else if (!d->channel_major)
        for (size_t j = 0; j < count; j++)
            dst[j] = raw ? (float)src[j] : (float)src[j] / 255.0f;
    else /* (C, H, W) -> (H, W, C) */
        for (size_t c = 0; c < C; c++)
            for (size_t j = 0; j < hw; j++)
                dst[j * C + c] = raw ? (float)src[c * hw + j] : (float)src[c * hw + j] / 255.0f;
}

/* 1 when the caller is one thread and encoded images are to be decoded: then every thread of
 * the rank decodes (a whole slice); inside a parallel region each thread decodes its own
 * micro-batch. */
static int decode_in_parallel(const mw_dataset *d, int n)
{
    int nested = 0;
#ifdef _OPENMP
    nested = omp_in_parallel();
#endif
    return d->type == MW_IMAGES_ENCODED && !nested && n > 1;
}

/* Through the input pipeline: each example assembled into scratch, then transformed into x. */
static void batch_pipeline(const mw_dataset *d, float *x, const uint32_t *ids, int n, size_t nbytes)
{
    const mw_preprocess *p = d->pre;
    const size_t in = mw_preprocess_in_count(p), out = mw_preprocess_out_count(p);
    const int L = mw_preprocess_nlayers(p);
    const int raw = mw_preprocess_takes_raw(p);
#pragma omp parallel if (decode_in_parallel(d, n))
    {
        float *a = malloc(2 * in * sizeof *a);
        mw_pre_draw *draws = malloc((size_t)L * sizeof *draws);
        if (!a || !draws) { /* a few KiB: no way to go on, and no status to return */
            mw_log_error("out of memory assembling a batch (%zu bytes)", 2 * in * sizeof *a);
            abort();
        }
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            assemble(d, a, ids[i], nbytes, raw);
            if (d->augment)
                mw_preprocess_draw(p, d->aug_seed, d->epoch, ids[i], draws);
            mw_preprocess_apply(p, x + (size_t)i * out, a, a + in, d->augment, draws);
        }
        free(draws);
        free(a);
    }
}

mw_status mw_dataset_prefetch_start(mw_dataset *d, int threads, uint32_t capacity, double timeout)
{
    if (d->type != MW_IMAGES_ENCODED || threads < 1 || d->prefetch)
        return MW_OK;
    return mw_prefetch_new(&d->prefetch, d->stream, threads, capacity, timeout);
}

void mw_dataset_prefetch_hint(const mw_dataset *d, const uint32_t *ids, uint32_t n)
{
    if (d->prefetch)
        mw_prefetch_hint(d->prefetch, ids, n);
}

double mw_dataset_input_wait(const mw_dataset *d)
{
    return d->prefetch ? mw_prefetch_waited(d->prefetch) : 0.0;
}

mw_status mw_dataset_status(const mw_dataset *d)
{
    return d->stream ? mw_stream_status(d->stream) : MW_OK;
}

/* Encoded images without a pipeline (decode_in_parallel says by which threads). */
static void batch_encoded(const mw_dataset *d, float *x, const uint32_t *ids, int n, size_t count)
{
#pragma omp parallel for schedule(dynamic, 1) if (decode_in_parallel(d, n))
    for (int i = 0; i < n; i++)
        assemble(d, x + (size_t)i * count, ids[i], 0, 0);
}

void mw_dataset_batch(const mw_dataset *d, float *x, void *y, const uint32_t *ids, int n)
{
    const size_t count = (size_t)d->rows * d->cols * d->channels;
    const size_t nbytes = mw_dataset_image_nbytes(d);
    if (d->pre)
        batch_pipeline(d, x, ids, n, nbytes);
    else if (d->type == MW_IMAGES_ENCODED)
        batch_encoded(d, x, ids, n, count);
    else
        for (int i = 0; i < n; i++)
            assemble(d, x + (size_t)i * count, ids[i], nbytes, 0);
    const size_t tb = mw_dataset_target_nbytes(d);
    const uint8_t *src = d->targets ? (const uint8_t *)d->targets : (const uint8_t *)d->labels;
    for (int i = 0; y && i < n; i++)
        memcpy((uint8_t *)y + (size_t)i * tb, src + (size_t)ids[i] * tb, tb);
    if (d->map)
        release_pages(d, ids, n, nbytes);
}

/* Loss weights per example: a sequence's positions (labels (N, T)), else 1. */
static int positions_of(const mw_dataset *d)
{
    return d->label_width > 1 ? d->label_width : 1;
}

/* 1 when position t of example id counts in the loss: its label is not the ignored one, and
 * with a padding mask its input id is not 0 (the output's position t is the input's). */
static int position_counts(const mw_dataset *d, uint32_t id, int t)
{
    const int P = positions_of(d);
    if (d->mask_ignore && d->labels && d->labels[(size_t)id * P + t] == d->ignore_label)
        return 0;
    if (!d->mask_pad || d->type != MW_IMAGES_TOKENS)
        return 1;
    const uint8_t *x = d->images + (size_t)id * mw_dataset_image_nbytes(d);
    return mw_token_at(x + (size_t)(d->mask_off + t) * (size_t)d->tok_size, d->tok_size,
                       d->tok_signed) != 0;
}

float *mw_dataset_batch_weights(const mw_dataset *d, float *w, const uint32_t *ids, int n)
{
    if (!d->weights && !d->mask_w)
        return NULL;
    const int P = positions_of(d);
    for (int i = 0; i < n; i++) { /* Keras: sample_weight * mask */
        const int ww = d->weight_width > 1 ? d->weight_width : 1;
        for (int t = 0; t < P; t++) {
            const float sw = d->weights ? d->weights[(size_t)ids[i] * ww + (ww > 1 ? t : 0)] : 1.0f;
            w[(size_t)i * P + t] = !d->mask_w                      ? sw
                                   : position_counts(d, ids[i], t) ? sw * d->mask_w[ids[i]]
                                                                   : 0.0f;
        }
    }
    return w;
}

mw_status mw_dataset_set_mask(mw_dataset *d, int has_ignore, int32_t label, int pad,
                              const char *what)
{
    free(d->mask_w);
    free(d->valid);
    d->mask_w = NULL, d->valid = NULL;
    d->mask_ignore = has_ignore && d->labels, d->mask_pad = pad && d->type == MW_IMAGES_TOKENS;
    d->ignore_label = label;
    if (d->count == 0 || (!d->mask_ignore && !d->mask_pad))
        return MW_OK;
    d->mask_w = calloc(d->count, sizeof *d->mask_w);
    d->valid = calloc(d->count, sizeof *d->valid);
    if (!d->mask_w || !d->valid) {
        free(d->mask_w), free(d->valid);
        d->mask_w = NULL, d->valid = NULL;
        return mw_err(MW_ENOMEM, "%s: out of memory for the loss mask's factors (%u examples)",
                      what, d->count);
    }
    const int P = positions_of(d);
    const size_t nb = mw_dataset_image_nbytes(d);
    for (uint32_t i = 0; i < d->count; i++) {
        for (int t = 0; t < P; t++)
            d->valid[i] += (uint32_t)position_counts(d, i, t);
        if (d->map && d->mask_pad)
            release_pages(d, &i, 1, nb);
    }
    return MW_OK;
}

void mw_dataset_mask_batches(mw_dataset *d, const uint32_t *ids, long n, long gb)
{
    if (!d->mask_w || gb <= 0)
        return;
    if (n > (long)d->count)
        n = (long)d->count;
    const long P = positions_of(d);
    for (long at = 0; at < n; at += gb) {
        const long end = n - at < gb ? n : at + gb;
        long valid = 0;
        for (long i = at; i < end; i++)
            valid += d->valid[ids ? ids[i] : (uint32_t)i];
        /* Keras 3.15's apply_mask: divide_no_nan(total, valid), in float32 */
        const float f = valid > 0 ? (float)((end - at) * P) / (float)valid : 0.0f;
        for (long i = at; i < end; i++)
            d->mask_w[ids ? ids[i] : (uint32_t)i] = f;
    }
}

int mw_dataset_find_token(const mw_dataset *d, int64_t limit, uint32_t *example, uint32_t *pos,
                          int64_t *value)
{
    return mw_dataset_find_token_in(d, 0, (size_t)d->rows * d->cols * d->channels, limit, example,
                                    pos, value);
}

int mw_dataset_find_token_in(const mw_dataset *d, size_t off, size_t per, int64_t limit,
                             uint32_t *example, uint32_t *pos, int64_t *value)
{
    if (d->type != MW_IMAGES_TOKENS || d->tok_max < limit) /* the usual case: no scan */
        return 0;
    const size_t nb = mw_dataset_image_nbytes(d);
    for (uint32_t i = 0; i < d->count; i++) {
        const uint8_t *src = d->images + (size_t)i * nb + off * (size_t)d->tok_size;
        for (size_t t = 0; t < per; t++) {
            const int64_t v =
                mw_token_at(src + t * (size_t)d->tok_size, d->tok_size, d->tok_signed);
            if (v >= limit) {
                *example = i, *pos = (uint32_t)t, *value = v;
                return 1;
            }
        }
        if (d->map)
            release_pages(d, &i, 1, nb);
    }
    return 0;
}

void mw_dataset_classes_without(mw_dataset *train, mw_dataset *test, int32_t ignore)
{
    int32_t top = -1;
    const mw_dataset *sets[2] = {train, test};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; sets[s]->labels && i < (size_t)sets[s]->count * positions_of(sets[s]);
             i++)
            if (sets[s]->labels[i] != ignore && sets[s]->labels[i] > top)
                top = sets[s]->labels[i];
    if (top >= 0 && ignore > top && train->num_classes > top + 1)
        train->num_classes = test->num_classes = top + 1;
}

void mw_dataset_file_order(uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i;
}

void mw_dataset_epoch_order(uint32_t *ids, uint32_t n, uint64_t seed, int epoch)
{
    mw_rng r;
    mw_rng_seed(&r, seed, UINT64_C(0x5eed0000) + (uint64_t)epoch);
    mw_dataset_file_order(ids, n);
    mw_rng_shuffle(&r, ids, n);
}
