/* The data tests' driver: open --data PATH as mwtrain does (mw_dataset_open), assemble every
 * example of one split in order with mw_dataset_batch in batches of 64, and write what the
 * model would see: OUT.f32 (count x H x W x C float32: uint8 and encoded images / 255) and
 * OUT.labels (count int32), then print "count H W C classes seconds images_per_second".
 * --list prints each example's file and label instead ("PATH LABEL", encoded images only).
 * --repeat R assembles the split R times (throughput; written once). --decode-threads N: a
 * decoding pool of N threads (worker/data/prefetch.h) decodes each batch while the one before
 * is assembled, as training hints the next step. Options as mwtrain's:
 *
 *   data_load [--color-mode rgb|grayscale|rgba] [--image-size HxW] [--nearest] [--crop]
 *             [--image-key K] [--label-key K] [--split train|test] [--threads N]
 *             [--decode-threads N] [--validation-split F --validation-seed N] [--list]
 *             [--repeat R] [--out OUT] PATH
 *
 * A failure prints mwtrain's message on stderr and exits with its status's exit code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/status.h"
#include "common/timer.h"
#include "worker/data/data_open.h"
#include "worker/data/image_decode.h"
#include "worker/data/stream.h"

#define BATCH 64

static int fail(mw_status rc)
{
    fprintf(stderr, "data_load: %s\n", mw_err_msg());
    return mw_status_exit_code(rc);
}

static int usage(void)
{
    fprintf(stderr, "usage: data_load [--color-mode rgb|grayscale|rgba] [--image-size HxW] "
                    "[--nearest] [--crop] [--image-key K] [--label-key K] [--split train|test] "
                    "[--threads N] [--decode-threads N] [--repeat R] [--out OUT] PATH\n");
    return 2;
}

/* Every example of d in order, R times; the first pass written to f (may be NULL). */
static mw_status assemble(mw_dataset *d, int repeat, FILE *fx, FILE *fy, double *secs)
{
    const size_t per = (size_t)d->rows * d->cols * d->channels;
    float *x = malloc(BATCH * per * sizeof *x);
    int32_t y[BATCH];
    uint32_t ids[BATCH];
    if (!x)
        return mw_err(MW_ENOMEM, "out of memory");
    const double t0 = mw_now();
    for (int r = 0; r < repeat; r++)
        for (uint32_t i = 0; i < d->count; i += BATCH) {
            const int n = d->count - i < BATCH ? (int)(d->count - i) : BATCH;
            for (int j = 0; j < n; j++)
                ids[j] = i + (uint32_t)j;
            uint32_t next[BATCH], m = 0; /* the next batch, for the pool */
            for (uint32_t j = i + BATCH; j < d->count && m < BATCH; j++)
                next[m++] = j;
            if (i == 0)
                mw_dataset_prefetch_hint(d, ids, (uint32_t)n);
            mw_dataset_prefetch_hint(d, next, m);
            mw_dataset_batch(d, x, y, ids, n);
            if (r == 0 && fx)
                fwrite(x, sizeof *x, (size_t)n * per, fx), fwrite(y, sizeof *y, (size_t)n, fy);
        }
    *secs = mw_now() - t0;
    free(x);
    return mw_dataset_status(d);
}

int main(int argc, char **argv)
{
    mw_data_opts o = {.cifar_fine = 1, .color_channels = 3, .validation_seed = -1};
    const char *split = "train", *out = NULL;
    int repeat = 1, i = 1, pool = 0, list = 0;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--color-mode") == 0) {
            const char *m = argv[++i];
            o.color_channels = strcmp(m, "grayscale") == 0 ? 1 : strcmp(m, "rgba") == 0 ? 4 : 3;
        } else if (strcmp(a, "--image-size") == 0) {
            if (sscanf(argv[++i], "%ux%u", &o.image_h, &o.image_w) != 2)
                return usage();
        } else if (strcmp(a, "--nearest") == 0)
            o.interp = MW_IMAGE_NEAREST;
        else if (strcmp(a, "--crop") == 0)
            o.crop = 1;
        else if (strcmp(a, "--image-key") == 0)
            o.image_key = argv[++i];
        else if (strcmp(a, "--label-key") == 0)
            o.label_key = argv[++i];
        else if (strcmp(a, "--split") == 0)
            split = argv[++i];
        else if (strcmp(a, "--repeat") == 0)
            repeat = atoi(argv[++i]);
        else if (strcmp(a, "--list") == 0)
            list = 1;
        else if (strcmp(a, "--validation-split") == 0)
            o.validation_split = atof(argv[++i]);
        else if (strcmp(a, "--validation-seed") == 0)
            o.validation_seed = atoll(argv[++i]);
        else if (strcmp(a, "--decode-threads") == 0)
            pool = atoi(argv[++i]);
        else if (strcmp(a, "--out") == 0)
            out = argv[++i];
        else if (strcmp(a, "--threads") == 0) {
            const int t = atoi(argv[++i]);
#ifdef _OPENMP
            omp_set_num_threads(t > 0 ? t : 1);
#endif
            (void)t;
        } else
            return usage();
    }
    if (i + 1 != argc || repeat < 1)
        return usage();
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_status rc = mw_dataset_open(&tr, &te, argv[i], &o);
    if (rc != MW_OK)
        return fail(rc);
    mw_dataset *d = strcmp(split, "test") == 0 ? &te : &tr;
    if (pool > 0 && (rc = mw_dataset_prefetch_start(d, pool, 2 * BATCH, 60)) != MW_OK)
        return fail(rc);
    if (list && d->stream) {
        for (uint32_t k = 0; k < d->count; k++)
            printf("%s %d\n", mw_stream_source(d->stream, mw_stream_source_of(d->stream, k)),
                   d->labels[k]);
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
        return 0;
    }
    FILE *fx = NULL, *fy = NULL;
    char path[4096];
    if (out) {
        snprintf(path, sizeof path, "%s.f32", out);
        fx = fopen(path, "wb");
        snprintf(path, sizeof path, "%s.labels", out);
        fy = fopen(path, "wb");
        if (!fx || !fy)
            return fail(mw_err(MW_EIO, "%s: cannot create", out));
    }
    double secs = 0;
    rc = assemble(d, repeat, fx, fy, &secs);
    if (fx && (fclose(fx) != 0 || fclose(fy) != 0) && rc == MW_OK)
        rc = mw_err(MW_EIO, "%s: write error", out);
    if (rc != MW_OK)
        return fail(rc);
    printf("%u %u %u %u %d %.6f %.1f\n", d->count, d->rows, d->cols, d->channels, d->num_classes,
           secs, secs > 0 ? (double)d->count * repeat / secs : 0.0);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    return 0;
}
