/* The hierarchical all-reduce on GPUs: NCCL among the GPUs of a node, the MPI ring between
 * nodes (Horovod's pattern). Plain C with no CUDA or NCCL types, so the GPU backend and the
 * tests include it without CUDA's headers; its code (nccl.c) lives in the CUDA module with the
 * GPU backend (worker/meson.build), the only caller.
 *
 * One NCCL communicator spans every GPU of the node. Its ranks are numbered
 * local rank x ndev_local + d, where a process drives ndev_local GPUs (1: one rank per GPU; more:
 * one rank driving several GPUs as replicas, with ncclGroupStart/End around its per-device
 * calls). Every node must have the same number of ranks and each the same ndev_local.
 *
 * A sum over every GPU of the cluster, in place on each device buffer:
 *   one node     ncclAllReduce.
 *   several      ncclReduceScatter inside the node (GPU g keeps shard g of count / G, G = GPUs
 *                per node), each process copies its shards to pinned host memory, runs the MPI
 *                ring (cluster/ring.h) over `cross` with the ranks of its local rank on the
 *                other nodes (every local rank its own shards, in parallel), copies back, and
 *                ncclAllGather rebuilds the buffer. The count % G floats that do not fill a
 *                shard go with local rank 0's shards: ncclReduce to GPU 0 of the node, the ring,
 *                ncclBroadcast back.
 *
 * Failing loudly, never hanging: NCCL runs in non-blocking mode (config.blocking = 0). Every
 * wait on NCCL work polls ncclCommGetAsyncError and cudaStreamQuery under the collective
 * timeout; on an error or past the timeout the communicator is aborted (ncclCommAbort, which
 * also stops kernels stuck waiting for a dead peer) and the call returns MW_EDEVICE or
 * MW_ETIMEOUT with a message naming the operation, the step, the device and what failed. An
 * aborted object only fails from then on; close it. */
#ifndef MW_CLUSTER_NCCL_H
#define MW_CLUSTER_NCCL_H

#include <stddef.h>

#include <mpi.h>

#include "common/status.h"

typedef struct mw_nccl mw_nccl;

/* Collective over node (the topology's node_comm; MPI_COMM_NULL: this process alone) and, for
 * the checks, cross (the topology's cross; MPI_COMM_NULL: one node). devices: the ndev_local
 * CUDA device ordinals this process drives (copied). Local rank 0 creates the NCCL id
 * (ncclGetUniqueId) and broadcasts it over node with the timeout; then every process joins the
 * communicator and waits for it under the timeout (seconds; <= 0: forever). max_count: the
 * largest count mw_nccl_allreduce will be given; with several nodes the pinned host staging
 * for that count is allocated here, so no all-reduce allocates or frees (both synchronize).
 *
 * Checked first and agreed by every rank, so all return the same status: equal ndev_local on
 * the node, no GPU (by PCI bus id) driven twice on a node (NCCL needs one rank per GPU: ranks
 * sharing GPUs round-robin cannot use it), and the same number of GPUs on every node.
 * MW_EDEVICE (or MW_ETIMEOUT) with one message; *out is NULL then. */
mw_status mw_nccl_open(mw_nccl **out, MPI_Comm node, MPI_Comm cross, int ndev_local,
                       const int *devices, size_t max_count, double timeout);
/* mw_nccl_open, and then, with several nodes, ONE NCCL communicator over every GPU of the
 * cluster instead of a node's (all: the training ranks' communicator; its ranks numbered rank
 * in all x ndev_local + d): every all-reduce is an ncclAllReduce, with NCCL's own transport
 * between nodes (InfiniBand or RoCE with GPUDirect where the fabric has them, else its
 * sockets), no host staging, and buckets allowed (mw_nccl_nodes is then 1). The checks are
 * mw_nccl_open's, over node and cross; the NCCL id comes from rank 0 of all. With one node it
 * is mw_nccl_open. */
mw_status mw_nccl_open_flat(mw_nccl **out, MPI_Comm node, MPI_Comm cross, MPI_Comm all,
                            int ndev_local, const int *devices, size_t max_count, double timeout);

/* bufs[d] (device memory on devices[d], count floats) = the sum over every GPU of the cluster
 * of its bufs[d], in place. Collective: every process calls it with the same count, at most
 * the max_count given at open (MW_EINTERNAL otherwise). streams:
 * NULL (the object's own streams; the caller must have finished writing bufs) or ndev_local
 * cudaStream_t values, one per device (e.g. mw_cuda_stream of the compute context, so the
 * reduction follows the backward pass in stream order). Returns when the sums are in bufs and
 * the streams are idle. step (>= 0) is named in messages; -1 when not in a step. */
mw_status mw_nccl_allreduce(mw_nccl *n, float **bufs, size_t count, void **streams, long step);

/* mw_nccl_allreduce in two halves, so work can follow the sums in stream order without a
 * host wait between them (the optimizer update): _start enqueues the reduction (with several
 * nodes it also waits, polled, for the shards' copy to the host and runs the ring) and
 * returns once NCCL has put it on the streams; work the caller then enqueues on the same
 * streams runs after the sums. mw_nccl_wait waits, polled under the timeout, until those
 * streams are idle (the sums and whatever followed them); a no-op when nothing was started.
 * Each _start needs its wait before the next (MW_EINTERNAL otherwise). */
mw_status mw_nccl_allreduce_start(mw_nccl *n, float **bufs, size_t count, void **streams,
                                  long step);
mw_status mw_nccl_wait(mw_nccl *n);

/* One bucket of an overlapped all-reduce, on one node only (mw_nccl_nodes 1; MW_EINTERNAL
 * otherwise): ncclAllReduce of floats [off, off + count) of each bufs[d] in place, enqueued on
 * streams (as _start's) behind what they hold; returns once NCCL has put it there. A step's
 * buckets are enqueued one after another, in the same order on every rank, with no wait
 * between them; one mw_nccl_wait then waits for all (the streams idle). No _start may be
 * pending. */
mw_status mw_nccl_allreduce_bucket(mw_nccl *n, float **bufs, size_t off, size_t count,
                                   void **streams, long step);

/* How this process's waits on the communicator's streams tell a device that is still working
 * from one that is stuck: progress(ctx) returns a count that grows while its GPUs work (the sum
 * of mw_cuda_progress over its compute contexts). The waits' --collective-timeout then counts
 * from the count's last move, so it starts when this process's own compute before the
 * collective is done (a long backward is not a stuck peer). Without one (the default) it counts
 * from the wait's start. */
void mw_nccl_set_progress(mw_nccl *n, long (*progress)(void *ctx), void *ctx);

/* Finalize and destroy the communicator (ncclCommFinalize polled under the timeout, then
 * ncclCommDestroy), or ncclCommAbort after a failure; free everything; *n = NULL. Safe on
 * NULL. */
void mw_nccl_close(mw_nccl **n);

/* GPUs per node (NCCL ranks of the node's communicator) and nodes of the ring; after
 * mw_nccl_open_flat across nodes, every GPU of the cluster and 1. */
int mw_nccl_node_gpus(const mw_nccl *n);
int mw_nccl_nodes(const mw_nccl *n);

/* "NCCL 2.28.9" (the library linked), or "NCCL: not built". Static storage; never NULL. */
const char *mw_nccl_version_string(void);

#endif
