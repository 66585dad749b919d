/* The CPU backend's overlapped gradient all-reduce (--overlap-allreduce on): the gradient
 * arena cut into buckets of consecutive layers in reverse order (about --bucket-mb each), each
 * all-reduced by one communication thread as soon as every compute thread's backward has
 * passed its layers, while the backward of the earlier layers still runs.
 *
 * Why it trains the same model bit for bit: the layers' parameters lie in the arena in layer
 * order (worker/model/model.c), and the backward runs the layers in descending order, so a
 * bucket [off, end) of layers first .. last is final for a thread once its last micro-batch's
 * backward has finished layer `first` (a layer's backward writes its own parameters'
 * gradients; a tied ReversibleEmbedding writes its Embedding's, an EARLIER layer, before that
 * layer's backward). Per bucket the thread does what the serial path does for the whole
 * arena: the per-thread gradients summed in thread order, the regularizers' gradients added
 * layer by layer, and the all-reduce of the range, whose sums do not depend on the cut where
 * mw_allreduce_cut_exact says so (the caller falls back to one all-reduce otherwise).
 *
 * MPI: only the communication thread calls MPI between mw_overlap_begin and the end of
 * mw_overlap_wait, and the training thread calls none then (MPI_THREAD_SERIALIZED). Every
 * wait inside the all-reduce has the collective timeout, so a peer that is gone ends the step
 * with the usual error, which mw_overlap_wait returns on the training thread. */
#ifndef MW_WORKER_REPLICAS_OVERLAP_H
#define MW_WORKER_REPLICAS_OVERLAP_H

#include <stddef.h>

#include "cluster/allreduce.h"
#include "common/status.h"
#include "worker/model/model.h"
#include "worker/replicas/buckets.h"

typedef struct mw_overlap mw_overlap;

typedef struct {
    const mw_model *model;
    mw_allreduce *ar;    /* borrowed; opened over params.count floats */
    float *const *grads; /* nthreads per-thread arenas (borrowed); grads[0] gets the sum */
    int nthreads;        /* compute threads */
    double bucket_bytes; /* a bucket closes once it holds this many bytes (0: every layer) */
} mw_overlap_env;

/* The warning (from rank 0) that --overlap-allreduce on is not used here, and why; the CPU's
 * and the GPU backend's. */
void mw_overlap_not_used(int rank, const char *why);
/* Plans the buckets and starts the thread. */
mw_status mw_overlap_open(mw_overlap **out, const mw_overlap_env *env);
/* The number of buckets planned. */
int mw_overlap_buckets(const mw_overlap *o);
/* A step starts (grads zeroed, no backward begun): reg_scale is the regularizers' gradient
 * scale (mw_model_regularization's), step for messages. */
void mw_overlap_begin(mw_overlap *o, long step, float reg_scale);
/* Thread th's next backward is its last of the step: ws reports its layers (or, with
 * ws NULL, thread th has no more backward at all: every layer is done for it). */
void mw_overlap_last(mw_overlap *o, int th, mw_model_ws *ws);
/* After thread th's last backward: clears ws's hook and marks every layer done for th. */
void mw_overlap_finish(mw_overlap *o, int th, mw_model_ws *ws);
/* Waits until every bucket is summed over the ranks; the first error of the step. */
mw_status mw_overlap_wait(mw_overlap *o);
/* Stops the thread and frees *o: 1. Abandoned (a peer is gone) while the thread is inside a
 * bucket, whose all-reduce may wait out the collective timeout: 0, nothing stopped or freed,
 * and the caller must keep the gradients it reads (left to the process's end). Otherwise a
 * bucket in flight is waited out. */
int mw_overlap_close(mw_overlap **o, int abandoned);

#endif
