/* The gradient buckets of the overlapped all-reduce (buckets.h), cut the same way for the CPU's
 * communication thread and the GPU backend's reduce streams. */
#include <stdlib.h>

#include "worker/replicas/buckets.h"

/* Where layer l's parameters begin, or (size_t)-1 when it has none. */
static size_t layer_off(const mw_layer *l)
{
    if (l->w_count)
        return l->w_off;
    if (l->b_count)
        return l->b_off;
    return l->stats_count ? l->stats_off : (size_t)-1;
}

mw_status mw_buckets_plan(const mw_model *m, double bucket_bytes, mw_bucket **b, int *nb,
                          char **opens)
{
    *nb = 0;
    *b = calloc((size_t)m->nlayers + 1, sizeof **b);
    *opens = calloc((size_t)m->nlayers + 1, 1);
    if (!*b || !*opens)
        return mw_err(MW_ENOMEM, "overlapped all-reduce: out of memory");
    size_t end = m->params.count;
    int last = m->nlayers - 1;
    for (int i = m->nlayers - 1; i > 0; i--) {
        size_t off = layer_off(&m->layers[i]);
        if (off == (size_t)-1 || (double)(end - off) * sizeof(float) < bucket_bytes)
            continue;
        (*b)[(*nb)++] = (mw_bucket){.off = off, .end = end, .first = i, .last = last};
        (*opens)[i] = 1;
        end = off, last = i - 1;
    }
    (*b)[(*nb)++] = (mw_bucket){.off = 0, .end = end, .first = 0, .last = last};
    (*opens)[0] = 1;
    return MW_OK;
}
