/* The gradient arena cut into buckets for the overlapped all-reduce (buckets.c). */
#ifndef MW_WORKER_REPLICAS_BUCKETS_H
#define MW_WORKER_REPLICAS_BUCKETS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model/model.h"

/* A bucket: floats [off, end) of the gradient arena, the parameters of layers first..last. */
typedef struct {
    size_t off, end;
    int first, last;
} mw_bucket;

/* The buckets of m in backward order: from the arena's end down,
 * each closed at the first layer that brings it to bucket_bytes (0: every layer with
 * parameters closes one); the last reaches float 0 and layer 0. *b (*nb of them) and *opens
 * (per layer, 1 when it is some bucket's first layer) are the caller's to free. The CPU's
 * overlap (overlap.h) and the GPU backend's (overlap_gpu.h) cut the same buckets. */
mw_status mw_buckets_plan(const mw_model *m, double bucket_bytes, mw_bucket **b, int *nb,
                          char **opens);

#endif
