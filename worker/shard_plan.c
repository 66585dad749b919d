/* The file shard policy's epoch order (see shard_plan.h). */
#include "worker/shard_plan.h"

#include <stdlib.h>
#include <string.h>

#include "worker/data/stream.h"
#include "worker/replicas/replicas.h"

/* Walk an epoch's steps over the per-rank counts: full global batches while every rank can fill
 * its share, then the largest shorter one every rank can (at least one example a replica). With
 * order, fill it from the ranks' lists (lists[q] of counts[q]); returns the positions filled. */
static long walk(const mw_shard_plan *p, const uint32_t *counts, uint32_t *const *lists,
                 uint32_t *order)
{
    const int nrep = p->ranks * p->rpw;
    long start = 0, *used = calloc((size_t)p->ranks, sizeof *used);
    if (!used)
        return 0;
    for (long gb = p->gb; gb >= nrep;) { /* a shorter batch still gives every replica one */
        int fits = 1;
        for (int q = 0; q < p->ranks && fits; q++) {
            long off0, c0, off1, c1;
            mw_slice(gb, nrep, q * p->rpw, &off0, &c0);
            mw_slice(gb, nrep, q * p->rpw + p->rpw - 1, &off1, &c1);
            fits = used[q] + (off1 + c1 - off0) <= (long)counts[q];
        }
        if (!fits) {
            gb--; /* a shorter batch, down to what every rank can still fill */
            continue;
        }
        for (int i = 0; i < nrep; i++) {
            long off, cnt;
            mw_slice(gb, nrep, i, &off, &cnt);
            const int q = i / p->rpw;
            if (order)
                memcpy(order + start + off, lists[q] + used[q], (size_t)cnt * sizeof *order);
            used[q] += cnt;
        }
        start += gb;
        if (gb < p->gb)
            break; /* the epoch's last, shorter batch */
    }
    free(used);
    return start;
}

mw_status mw_shard_plan_make(mw_shard_plan *p, const mw_dataset *d, int ranks, int rpw, long gb,
                             const char *path)
{
    memset(p, 0, sizeof *p);
    if (d->type != MW_IMAGES_ENCODED || d->count == 0 || !mw_stream_is_records(d->stream))
        return mw_err(MW_EDATA,
                      "%s: --shard-policy file gives each worker whole TFRecord shards; this "
                      "data is not read from shards (use the default, --shard-policy data)",
                      path);
    const uint32_t nsrc = mw_stream_source_count(d->stream);
    if (nsrc < (uint32_t)ranks)
        return mw_err(MW_EDATA,
                      "%s: --shard-policy file needs a shard for every worker: %u training "
                      "shards for %d ranks (use --shard-policy data, or more shards)",
                      path, nsrc, ranks);
    p->ranks = ranks, p->rpw = rpw, p->gb = gb;
    p->ids = malloc((size_t)d->count * sizeof *p->ids);
    p->first = calloc((size_t)ranks + 1, sizeof *p->first);
    p->scratch = malloc((size_t)d->count * sizeof *p->scratch);
    if (!p->ids || !p->first || !p->scratch) {
        mw_shard_plan_free(p);
        return mw_err(MW_ENOMEM, "%s: out of memory for the shard plan (%u examples)", path,
                      d->count);
    }
    for (uint32_t i = 0; i < d->count; i++) /* counts, then offsets, then the ids in order */
        p->first[mw_stream_source_of(d->stream, i) % (uint32_t)ranks + 1]++;
    for (int q = 0; q < ranks; q++)
        p->first[q + 1] += p->first[q];
    uint32_t *at = p->scratch;
    memcpy(at, p->first, (size_t)ranks * sizeof *at);
    for (uint32_t i = 0; i < d->count; i++)
        p->ids[at[mw_stream_source_of(d->stream, i) % (uint32_t)ranks]++] = i;
    p->examples = -1;
    mw_shard_plan_order(p, NULL, 0, 0, 0); /* the epoch's length: the same every epoch */
    if (p->examples <= 0) {
        mw_shard_plan_free(p);
        return mw_err(MW_ENOMEM, "%s: out of memory for the shard plan", path);
    }
    return MW_OK;
}

/* The counts and lists of the ranks (lists into ids, or into scratch once permuted). */
static int views(const mw_shard_plan *p, uint32_t **counts, uint32_t ***lists, uint32_t *base)
{
    *counts = malloc((size_t)p->ranks * sizeof **counts);
    *lists = malloc((size_t)p->ranks * sizeof **lists);
    if (!*counts || !*lists)
        return 0;
    for (int q = 0; q < p->ranks; q++) {
        (*counts)[q] = p->first[q + 1] - p->first[q];
        (*lists)[q] = base + p->first[q];
    }
    return 1;
}

void mw_shard_plan_order(mw_shard_plan *p, uint32_t *order, int shuffle, uint64_t seed, int epoch)
{
    uint32_t *counts, **lists;
    if (!order) { /* the length only */
        p->examples = views(p, &counts, &lists, p->ids) ? walk(p, counts, lists, NULL) : 0;
        free(counts);
        free(lists);
        return;
    }
    for (int q = 0; q < p->ranks; q++) { /* each rank's examples in its own seeded order */
        const uint32_t n = p->first[q + 1] - p->first[q];
        uint32_t *perm = p->scratch + p->first[q];
        if (shuffle)
            mw_dataset_epoch_order(
                perm, n, seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(q + 1)), epoch);
        else
            mw_dataset_file_order(perm, n);
        for (uint32_t k = 0; k < n; k++)
            perm[k] = p->ids[p->first[q] + perm[k]];
    }
    if (views(p, &counts, &lists, p->scratch))
        walk(p, counts, lists, order);
    free(counts);
    free(lists);
}

void mw_shard_plan_free(mw_shard_plan *p)
{
    free(p->ids);
    free(p->first);
    free(p->scratch);
    memset(p, 0, sizeof *p);
}
