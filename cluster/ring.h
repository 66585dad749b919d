/* A sum all-reduce of a host float buffer around a ring of MPI ranks, with the collective
 * timeout: the one ring of the project. It is
 *   - the inter-node step of the GPU hierarchical all-reduce (cluster/nccl.c): after NCCL's
 *     reduce-scatter inside each node, every local rank runs its own ring over the topology's
 *     `cross` communicator (the ranks with its local rank, one per node) on its host-staged
 *     shard, all local ranks in parallel;
 *   - the CPU all-reduce's `ring` algorithm over the training ranks, and the cross-node step of
 *     its `hierarchical` one (cluster/allreduce.c).
 * It is plain MPI, so its tests run without a GPU.
 *
 * Algorithm: reduce-scatter then all-gather, 2(P-1) steps each moving about count/P floats,
 * cut into segments so the adds of early segments overlap later transfers. Chunk c of P is
 * count/P floats, the first count % P chunks one longer, so any count works (0, fewer than P,
 * not divisible). The adds run in an order fixed by P and count: chunk c is rank c's values,
 * plus rank c + 1's, plus rank c + 2's, ... in ring order (mod P), one add per step. So the
 * same layout twice gives bitwise equal sums, and the segment and window sizes, which only
 * cut the transfers, do not change them.
 *
 * Every wait goes through mw_comm_wait: past the timeout it returns MW_ETIMEOUT naming the
 * operation, the step and the neighbour: with mw_ring_open, its node and its rank in
 * MPI_COMM_WORLD (mpirun's rank); with mw_ring_open_as, the caller's name for the operation and
 * its number for the rank (the CPU all-reduce names training ranks). The requests then stay
 * pending; the caller ends the job. */
#ifndef MW_CLUSTER_RING_H
#define MW_CLUSTER_RING_H

#include <stddef.h>

#include <mpi.h>

#include "common/status.h"

typedef struct {
    MPI_Comm comm;                   /* borrowed */
    int rank, size;                  /* in comm */
    int left_peer, right_peer;       /* the neighbours' ranks as messages name them */
    float *tmp;                      /* receive scratch (owned) */
    double timeout;                  /* seconds; <= 0: wait forever */
    char recv_op[128], send_op[128]; /* "<what>, receiving from node 1" or the op as given */
} mw_ring;

void mw_ring_init(mw_ring *r);
/* Collective over comm (MPI_COMM_NULL: a ring of one, every sum is the identity). what names
 * the operation in messages ("NCCL all-reduce (cross-node ring)"); it is copied. */
mw_status mw_ring_open(mw_ring *r, MPI_Comm comm, const char *what, double timeout);
/* mw_ring_open with the caller's words in messages: op names the operation in both directions
 * as it is ("ring all-reduce"; copied), and a neighbour is named peer_of[its rank in comm] (the
 * caller's numbering, such as training ranks), or its rank in comm when peer_of is NULL. */
mw_status mw_ring_open_as(mw_ring *r, MPI_Comm comm, const char *op, const int *peer_of,
                          double timeout);
/* buf[0..count) = the sum over the ring's ranks of their buf, in place. Collective: every rank
 * passes the same count. step (>= 0) is named in a timeout message; -1 when not in a step. */
mw_status mw_ring_sum(mw_ring *r, float *buf, size_t count, long step);
/* The same for floats [off, off + count) of a buffer of total floats, buf pointing at float
 * off: the chunks are the whole buffer's, cut to the range, so each float is added in the
 * order mw_ring_sum gives it in the whole buffer (a chunk's sum starts at its own rank), bit
 * for bit, however the buffer is cut into ranges. */
mw_status mw_ring_sum_part(mw_ring *r, float *buf, size_t off, size_t count, size_t total,
                           long step);
/* Chunk c of P (as even as possible, the first total % P one longer) of a buffer of total
 * floats, cut to floats [off, off + count): *o counted from off, *len 0 where they do not meet. */
void mw_ring_piece(size_t off, size_t count, size_t total, int P, int c, size_t *o, size_t *len);
/* Frees the scratch; safe on an initialized or half-opened ring. Leaves r initialized. */
void mw_ring_close(mw_ring *r);

#endif
