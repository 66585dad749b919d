/* Sum-all-reduce of one flat float buffer across the training ranks.
 *
 * Algorithms (--allreduce):
 *   ring          reduce-scatter then all-gather around a ring over MPI
 *                 point-to-point, in segments so transfers overlap the adds;
 *                 bandwidth-optimal, any count (0, fewer than ranks, ...).
 *                 It is cluster/ring.h's ring, as is the cross-node step below.
 *   hierarchical  node-local reduce-scatter through MPI-3 shared memory, a
 *                 ring across nodes among the ranks with the same local rank
 *                 (each on its own shard), then a node-local all-gather.
 *                 Needs the same number of ranks on every node.
 *   mpi           MPI_Allreduce, the baseline.
 *   halving-doubling  recursive halving (a reduce-scatter) then recursive
 *                 doubling (an all-gather), pairs of ranks exchanging halves:
 *                 log2 P steps each way, for latency-bound sizes (halving.c).
 *                 tests/bench/bench_allreduce: 2.3x MPI_Allreduce at 4 bytes on
 *                 2 ranks, 0.6-1.0x on 4 ranks sharing 2 cores (the ring 0.4-0.8x).
 *   auto          hierarchical when every node has the same number of ranks
 *                 and some node has more than one and the node's ranks really
 *                 share memory; otherwise ring for buffers >= 64 KiB and mpi
 *                 below (latency-bound sizes, where MPI's tree wins).
 *
 * The algorithms are the rows of a table in allreduce.c (name, function); a new one is an
 * enum value here, its row there, and its own file with its header (halving.c, halving.h).
 *
 * Every algorithm adds in an order fixed by the layout, so the same layout
 * run twice gives bitwise equal sums. Every wait has the collective timeout.
 *
 * Zero copy: mw_allreduce_buffer returns this rank's shared-memory slot when
 * the hierarchical path is active; a caller that keeps its gradients there
 * skips the copy in. */
#ifndef MW_CLUSTER_ALLREDUCE_H
#define MW_CLUSTER_ALLREDUCE_H

#include <stddef.h>

#include <mpi.h>

#include "cluster/halving.h"
#include "cluster/ring.h"
#include "common/status.h"

typedef enum {
    MW_AR_AUTO,
    MW_AR_RING,
    MW_AR_HIER,
    MW_AR_MPI,
    MW_AR_HALVING,
    MW_AR_COUNT
} mw_ar_algo;
/* The algorithms' names, indexed by mw_ar_algo, NULL-terminated (--allreduce's choices). */
extern const char *const mw_ar_algo_names[MW_AR_COUNT + 1];

typedef struct {
    mw_ar_algo requested, algo; /* algo: what runs (auto resolved per call) */
    MPI_Comm comm, node, cross; /* borrowed */
    int rank, size, local_rank, local_size, node_index, nnodes;
    int hier_ok; /* the hierarchical path is set up */
    size_t max_count;
    mw_ring ring;       /* over comm: the ring algorithm */
    mw_ring cross_ring; /* over cross: the hierarchical path's step across nodes, when used */
    MPI_Win win;
    float *slot;          /* my shared slot (max_count floats) */
    float **slots;        /* every local rank's slot (owned array) */
    volatile long *flags; /* shared barrier counters, one cache line per local rank */
    long epoch;
    int *node_peer; /* train rank of each local rank, for messages (owned) */
    double timeout;
    long step;                 /* for timeout messages; set by the caller */
    size_t total;              /* the current call's whole buffer (mw_allreduce_sum_at) */
    mw_halving halving;        /* over comm: the halving-doubling algorithm */
    unsigned long yield_after; /* spins before sched_yield in waits */
} mw_allreduce;

void mw_allreduce_init(mw_allreduce *ar);
/* Collective over train. node/cross are the topology's node and cross-node
 * communicators (MPI_COMM_NULL: treat every rank as its own node). */
mw_status mw_allreduce_open(mw_allreduce *ar, MPI_Comm train, MPI_Comm node, MPI_Comm cross,
                            size_t max_count, mw_ar_algo algo, double timeout);
/* This rank's shared slot (max_count floats) when hierarchical, else NULL. */
float *mw_allreduce_buffer(const mw_allreduce *ar);
/* buf = sum over ranks of buf, in place; count <= max_count. Collective. */
mw_status mw_allreduce_sum(mw_allreduce *ar, float *buf, size_t count);
/* Floats [off, off + count) of a buffer of total floats (<= max_count) in the layout of the
 * shared slot, buf pointing at float off (the slot's own when the caller keeps its gradients
 * there), with the requested algorithm resolved for total, as mw_allreduce_sum(total) would
 * run. Collective: every rank the same ranges in the same order. */
mw_status mw_allreduce_sum_at(mw_allreduce *ar, float *buf, size_t off, size_t count, size_t total);
/* 1 when every float's sum has the same bits however a buffer of total floats is cut into
 * ranges, each all-reduced on its own with mw_allreduce_sum_at: the ring and hierarchical
 * (their rings cut each range by the whole buffer's chunks and shards; a node adds its ranks'
 * slots in local-rank order), any algorithm on 2 ranks (a + b == b + a). Not MPI's own or
 * halving-doubling on 3 or more ranks: their order follows the range's own halves. */
int mw_allreduce_cut_exact(const mw_allreduce *ar, size_t total);
/* Run a specific algorithm (benchmarks and tests). */
mw_status mw_allreduce_sum_with(mw_allreduce *ar, mw_ar_algo algo, float *buf, size_t count);
void mw_allreduce_close(mw_allreduce *ar);

const char *mw_ar_algo_name(mw_ar_algo a);
/* One of mw_ar_algo_names; MW_EINVAL naming the value otherwise. */
mw_status mw_ar_algo_parse(const char *s, mw_ar_algo *out);

#endif
