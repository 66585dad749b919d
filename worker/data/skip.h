/* --skip-bad-examples for encoded images (worker/data/skip.c; docs/data.md, "Bad examples"): the
 * examples whose image does not decode are found before training and dropped from the set, as
 * tf.data's ignore_errors drops them, so that training never meets one. Each rank scans a
 * stride of the examples; the caller combines the marks of every rank (a max all-reduce) and
 * every rank drops the same ones. */
#ifndef MW_WORKER_DATA_SKIP_H
#define MW_WORKER_DATA_SKIP_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/data/data.h"

/* Decode the examples first, first + stride, ... of d (MW_IMAGES_ENCODED) on all threads,
 * setting bad[id] = 1 for each that fails; *nbad: how many, first: the first one's message
 * (cap bytes, "" when none). The failures are not kept as d's error. MW_ENOMEM when the
 * scratch cannot be allocated. */
mw_status mw_dataset_scan(mw_dataset *d, uint8_t *bad, uint32_t first, uint32_t stride,
                          uint32_t *nbad, char *msg, size_t cap);
/* Drop the examples whose drop[id] is not 0 from d (its labels and its stream), keeping the
 * order of the rest; *dropped: how many. */
void mw_dataset_drop(mw_dataset *d, const uint8_t *drop, uint32_t *dropped);

#endif
