/* The replica backend: what one training step asks of the hardware a rank trains on.
 *
 * worker/train.c knows only this table. The CPU backend (replicas_cpu.c: threads,
 * micro-batches, the host all-reduce) is built into mwtrain; the GPU backend
 * (replicas_gpu.c: CUDA devices, pinned staging, NCCL) lives in the CUDA module,
 * loaded by worker/replicas/device.c only when a GPU trains, the way kernels/ fills its
 * function table.
 *
 * A step, as the loop calls it (docs/design.md, "The step boundary"):
 *
 *     ops->grads(r, data, ids, gb, dseed, step);   this rank's replica slices
 *     ops->allreduce(r, step);               SUM over every replica
 *     ops->prefetch(r, data, next, ...);     the next step's batch (optional)
 *     ops->finite(r, &ok);                   mixed_float16 only: skip the update if not
 *     ops->update(r, &hyper);                the same update everywhere
 *     ops->metrics(r, sums, 0);              the epoch's running sums so far
 *
 * Replica slices: a global batch of gb examples over R replicas gives replica i
 * the contiguous slice mw_slice(gb, R, i): starting at i*base + min(i, rem), of
 * length base + (i < rem), base = gb / R, rem = gb % R. A replica may get 0
 * examples and still joins the all-reduce. Rank r runs replicas r*rpw ..
 * r*rpw + rpw - 1 (rpw = replicas per worker), in turn on the CPU, spread over
 * its GPUs on devices.
 *
 * State: the host arenas (the model's parameters, the optimizer slots m1, m2
 * and m3) are the source of truth for broadcasts and checkpoints. The CPU backend
 * trains on them directly; the GPU backend holds device copies, filled by push
 * and read back by pull. */
#ifndef MW_WORKER_REPLICAS_H
#define MW_WORKER_REPLICAS_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "cluster/topology.h"
#include "common/arena.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/data/data.h"
#include "worker/model/layers/batchnorm.h" /* the moving statistics, synchronized BN */
#include "worker/model/model.h"
#include "worker/model/model_ws.h" /* the workspaces every backend makes */
#include "worker/model/weights.h"  /* the regularizers' penalty */
#include "worker/optimizers.h"
#include "worker/opts.h"

/* What a backend is given; borrowed, alive until close. */
typedef struct {
    const mw_train_opts *o; /* replicas_per_worker resolved (>= 1) */
    const mw_topology *topo;
    MPI_Comm comm;              /* the ranks this backend sums over (MPI_COMM_SELF: alone) */
    int rank, world;            /* in comm */
    mw_model *model;            /* finalized; params hold the initial weights */
    mw_arena *m1, *m2, *m3;     /* host optimizer slots s1..s3 of kernels/optim.h */
    int nthreads;               /* CPU: compute threads of this rank */
    int first_device, ndevices; /* GPU: the CUDA devices this rank drives */
} mw_replicas_env;

typedef struct mw_replicas mw_replicas; /* a backend's own state */

typedef struct {
    const char *name; /* "cpu", "cuda" */
    /* Local set-up (workspaces, devices); talks to no other rank. On failure *out may
     * hold a half-built backend: close it. */
    mw_status (*open)(mw_replicas **out, const mw_replicas_env *env);
    /* Collective set-up over env->comm (the gradient all-reduce), entered by every rank
     * once every open succeeded. Not called when the backend only evaluates. */
    mw_status (*connect)(mw_replicas *r);
    /* Gradients of this rank's replica slices of a global batch of gb examples whose ids
     * are ids[0..gb), each loss scaled by 1/gb (dropout keyed by dseed and the example
     * ids), plus this rank's share of the weight penalty. The scaled loss (penalty
     * included), the correct count and the examples go into the running sums. step: the
     * training step, for messages (a synchronized BatchNormalization's all-reduce). */
    mw_status (*grads)(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                       uint64_t dseed, long step);
    /* Optional (NULL: nothing to gain). The next step's batch (its grads arguments), told
     * between this step's allreduce and update, so a backend can assemble and upload it while
     * the update runs; the next grads with the same d, ids, gb and dseed starts from it, and
     * any other grads or an evaluate drops it. ids stay valid until that grads. */
    mw_status (*prefetch)(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                          uint64_t dseed);
    /* Sum the gradients over every replica of the cluster (step: for messages). */
    mw_status (*allreduce)(mw_replicas *r, long step);
    /* Whether every summed gradient is finite (mixed_float16's dynamic loss scaling, Keras'
     * LossScaleOptimizer): read after allreduce, before update; every replica holds the same
     * sums, so every rank gets the same answer. */
    mw_status (*finite)(mw_replicas *r, int *all_finite);
    /* The running sums (kernels.h' MW_SUM_*: scaled loss, examples, the metrics' sums) of
     * this rank since the last reset, complete after update; reset: start again from zero. */
    void (*metrics)(mw_replicas *r, double sums[MW_SUMS], int reset);
    /* The optimizer update with this step's scalars (mw_optimizer_hyper), on every copy; h
     * NULL: a skipped step (non-finite gradients under loss scaling), which only folds the
     * batch statistics into BatchNormalization's moving ones, as Keras' skipped step does, and
     * drops the step's loss and metrics from the running sums (its loss may be non-finite:
     * a float16 overflow in the forward). */
    mw_status (*update)(mw_replicas *r, const mw_optim_hyper *h);
    /* Forward over this rank's replica slices of the first n examples of d (ids equal
     * positions); adds the loss sum, the examples and the metrics' sums into sums (MW_SUM_*). */
    mw_status (*evaluate)(mw_replicas *r, const mw_dataset *d, long n, double sums[MW_SUMS]);
    /* Host arenas -> the backend's copies (parameters; the optimizer slots too unless
     * weights_only), and the backend's copies -> the host arenas. */
    mw_status (*push)(mw_replicas *r, int weights_only);
    mw_status (*pull)(mw_replicas *r);
    /* One start-up line for the chief's log (after connect). */
    void (*describe)(const mw_replicas *r, char *buf, size_t len);
    /* Release everything; NULLs *r. abandoned: a peer may be gone, so skip what would
     * wait for one (the job is about to be aborted). */
    void (*close)(mw_replicas **r, int abandoned);
} mw_replicas_ops;

extern const mw_replicas_ops mw_replicas_cpu;

/* The CPU backend's plan, shared with the memory estimate (worker/memory.h) so the two
 * agree: its threads (nthreads clamped to 1..MW_CPU_MAX_THREADS), and the examples each
 * thread's workspace holds, min(micro_batch, ceil(batch_per_replica / threads)). */
#define MW_CPU_MAX_THREADS 256
int mw_cpu_threads(int nthreads);
int mw_cpu_examples_per_thread(const mw_train_opts *o, int threads);
/* The gradient arenas the CPU backend trains into: one per thread, each thread's backward of its
 * share of the slice, summed after; one for a BatchNormalization model, whose slice is one
 * backward over the whole slice on all threads together (batch statistics), into thread 0's. */
int mw_cpu_grad_arenas(const mw_model *m, int threads);

/* Replica i's slice of total examples over nrep replicas (see above). */
void mw_slice(long total, int nrep, int i, long *off, long *cnt);
/* Examples of total that rank's rpw replicas hold, of world * rpw replicas. */
long mw_rank_examples(long total, int world, int rpw, int rank);
/* A backend's metrics op: sums = acc, and acc = 0 when reset. */
void mw_metrics_take(double acc[MW_SUMS], double sums[MW_SUMS], int reset);
#endif
