/* The GPU backend's overlapped gradient all-reduce (--overlap-allreduce on, the GPUs of one
 * node), built into the CUDA module with worker/replicas/replicas_gpu.c.
 *
 * The gradient arena is cut into the CPU's buckets (buckets.h' mw_buckets_plan: consecutive
 * layers in reverse order, about --bucket-mb each). While the host enqueues a device's last
 * backward of the step, the model's per-layer hook tells it when a bucket's layers are done:
 * it enqueues the bucket's regularizer gradients on the compute stream, then makes the
 * device's reduce stream wait for the compute stream there (kernels/cuda/runtime.h). Once
 * every device of the rank has passed the bucket, its ncclAllReduce goes on the reduce
 * streams (cluster/nccl.h's mw_nccl_allreduce_bucket). So each bucket's sums run on the
 * device beside the backward of the earlier layers, as DDP's and Horovod's do; after the
 * last, the compute streams wait for the reduce streams and the update follows.
 *
 * The same weights as the serial path: a bucket's floats are final once its first layer's
 * backward is done (overlap.h says why), the regularizers add their gradients after the
 * backward's, as the serial path's do, and each float is summed over the same GPUs. NCCL's
 * order of the sum within a float may depend on where the buffer is cut with 3 or more GPUs
 * (with 2 it is one addition); the cut is fixed by the model and --bucket-mb, so two runs
 * still give the same bits (docs/gpus.md). Across nodes the host ring runs after the backward
 * as before (the caller does not open this). */
#ifndef MW_WORKER_REPLICAS_OVERLAP_GPU_H
#define MW_WORKER_REPLICAS_OVERLAP_GPU_H

#include "cluster/nccl.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/model/model.h"

typedef struct mw_gpu_overlap mw_gpu_overlap;

typedef struct {
    const mw_model *model;
    const mw_kernels *kt; /* the CUDA table */
    mw_nccl *nccl;        /* borrowed; one node */
    int ndev;             /* devices of this rank */
    mw_kctx *const *k;    /* their contexts (borrowed) */
    float *const *params; /* device arrays, the arena layout */
    float *const *grads;
    double *const *scratch; /* a device double each: the buckets' penalties, unused */
    double bucket_bytes;
} mw_gpu_overlap_env;

/* Plans the buckets (the env's arrays are copied). */
mw_status mw_gpu_overlap_open(mw_gpu_overlap **out, const mw_gpu_overlap_env *env);
int mw_gpu_overlap_buckets(const mw_gpu_overlap *o);
/* A training step starts: reg_scale is each device's regularizer scale (the serial path's
 * share), step for messages. */
void mw_gpu_overlap_begin(mw_gpu_overlap *o, long step, float reg_scale);
/* Device d's next backward is its last of the step: ws reports its layers. With ws NULL,
 * device d has no backward this step: its buckets are complete now. */
void mw_gpu_overlap_last(mw_gpu_overlap *o, int d, mw_model_ws *ws);
/* After device d's last backward: clears ws's hook; its buckets not reported yet are done. */
void mw_gpu_overlap_finish(mw_gpu_overlap *o, int d, mw_model_ws *ws);
/* After every device's last backward: the first failure of the step's buckets, or the
 * compute streams made to wait for the reduce streams (the update then follows the sums). */
mw_status mw_gpu_overlap_end(mw_gpu_overlap *o);
void mw_gpu_overlap_close(mw_gpu_overlap **o);

#endif
