/* Finding and dropping the examples that do not decode (see skip.h). */
#include "worker/data/skip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data/stream.h"

mw_status mw_dataset_scan(mw_dataset *d, uint8_t *bad, uint32_t first, uint32_t stride,
                          uint32_t *nbad, char *msg, size_t cap)
{
    *nbad = 0;
    msg[0] = '\0';
    if (d->type != MW_IMAGES_ENCODED || d->count == 0)
        return MW_OK;
    const size_t per = (size_t)d->rows * d->cols * d->channels;
    uint32_t n = 0, first_bad = UINT32_MAX;
    int oom = 0;
#pragma omp parallel reduction(+ : n)
    {
        float *x = malloc(per * sizeof *x);
        if (!x) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (uint64_t id = first; id < d->count; id += stride) {
            if (!x || mw_stream_decode(d->stream, x, (uint32_t)id, 1) == MW_OK)
                continue;
            bad[id] = 1;
            n++;
#pragma omp critical(mw_scan_first)
            if (id < first_bad) {
                first_bad = (uint32_t)id;
                snprintf(msg, cap, "%s", mw_err_msg());
            }
        }
        free(x);
    }
    if (oom)
        return mw_err(MW_ENOMEM, "out of memory scanning the images (%zu floats a thread)", per);
    mw_stream_clear(d->stream);
    *nbad = n;
    return MW_OK;
}

void mw_dataset_drop(mw_dataset *d, const uint8_t *drop, uint32_t *dropped)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->count; i++)
        if (!drop[i])
            d->labels[n++] = d->labels[i];
    *dropped = d->count - n;
    if (d->stream)
        mw_stream_drop(d->stream, drop);
    d->count = n;
}
