/* --shard-policy file: each worker reads whole TFRecord shards, as tf.data's
 * AutoShardPolicy.FILE gives each worker its files (worker/shard_plan.c; docs/data.md, "Shard
 * policies"). Rank r of R takes the shards r, r + R, r + 2R, ...; every step its replicas'
 * slices of the global batch are filled from its own shards' examples (each rank's in an order
 * seeded by (seed, epoch, rank)), so a rank reads only its own files. The epoch is as long as
 * the rank with the fewest examples allows: full global batches while every rank can fill its
 * share, then one shorter batch of what every rank still can (at least an example for every
 * replica); the rest waits for the next
 * epoch's order. Unlike the default policy the batches then depend on the cluster layout.
 *
 * The plan is made once (every rank the same, from the shards' table) and builds each epoch's
 * order in the layout the trainer reads: positions [start, start + gb) are step k's global
 * batch, a replica's slice at mw_slice's offset. */
#ifndef MW_WORKER_SHARD_PLAN_H
#define MW_WORKER_SHARD_PLAN_H

#include <stdint.h>

#include "common/status.h"
#include "worker/data/data.h"

typedef struct {
    int ranks, rpw;    /* ranks, replicas per rank */
    long gb;           /* the global batch */
    uint32_t *ids;     /* the examples grouped by rank (owned) */
    uint32_t *first;   /* ranks + 1 offsets into ids (owned) */
    uint32_t *scratch; /* one rank's permutation (owned) */
    long examples;     /* positions an epoch fills (<= the set's count) */
} mw_shard_plan;

/* The plan for d (TFRecord shards) over ranks x rpw replicas with global batch gb; path names
 * the data in messages. MW_EDATA when d is not read from shards or has fewer shards than
 * ranks. */
mw_status mw_shard_plan_make(mw_shard_plan *p, const mw_dataset *d, int ranks, int rpw, long gb,
                             const char *path);
/* The epoch's order into order[0..p->examples): each rank's examples shuffled by (seed, epoch,
 * rank), or in shard order without shuffle (--no-shuffle). */
void mw_shard_plan_order(mw_shard_plan *p, uint32_t *order, int shuffle, uint64_t seed, int epoch);
void mw_shard_plan_free(mw_shard_plan *p);

#endif
