/* The GPU replica backend's state (worker/replicas/replicas_gpu.c), shared with its batch
 * staging (gpu_stage.h): the devices a rank drives. Private to the CUDA module. */
#ifndef MW_WORKER_REPLICAS_GPU_BACKEND_H
#define MW_WORKER_REPLICAS_GPU_BACKEND_H

#include <stdint.h>

#include "cluster/nccl.h"
#include "kernels/kernels.h"
#include "worker/data/data.h"
#include "worker/model/model.h"
#include "worker/replicas/gpu_graphs.h"
#include "worker/replicas/overlap_gpu.h"
#include "worker/replicas/replicas.h"

#define MAX_GPUS 16
#define GPU_MAX_BATCH 1024 /* examples per device micro-batch, at most */

/* One device this rank drives. */
typedef struct {
    int ordinal;                          /* CUDA device number */
    mw_kctx k;                            /* stream, cuBLAS, device scratch */
    float *params, *grads, *m1, *m2, *m3; /* device arrays, the host arenas' layout */
    double *reg;     /* device: this step's weight penalty, then the buckets' unused one */
    double *metrics; /* device: the metrics' running sums (kernels.h MW_SUM_*) */
    mw_model_ws ws;  /* device workspace for one micro-batch */
    void *stage;     /* pinned host: the h_ buffers below */
    float *h_x[2];   /* the two staging slots (copy marks 0 and 1 after their uploads) */
    void *h_y[2];    /* targets (mw_dataset_target_nbytes each) */
    float *h_w[2];   /* sample weights */
    uint32_t *h_ids[2];
    void *dstage; /* device: the d_ slots below, the pinned slots' layout (compute marks 0, 1
                   * after the micro-batch that last read them) */
    float *d_x[2];
    void *d_y[2];              /* read in place by the loss and the metrics */
    float *d_w[2];             /* sample weights, read in place by the loss */
    uint32_t *d_ids[2];        /* the examples' ids (dropout), read in place */
    int slot;                  /* the slot of the micro-batch staged last */
    double *h_reg, *h_metrics; /* downloads of reg and metrics */
    unsigned round;            /* micro-batches staged: the slot is round % 2 */
    int pre_n;                 /* examples of the next step's first micro-batch staged (prefetch) */
    double *dsum, *dtot;       /* synchronized BN, device: this slice's sums, the cluster's */
    double *h_sum, *h_tot;     /* their pinned host copies (sstage) */
    void *sstage;
    mw_graph_cache graphs; /* --cuda-graphs on: the micro-batch shapes captured (gpu_graphs.h) */
} gpu_dev;

#define STEP_MARK 2 /* the mark after a step's update (one GPU, no NCCL) */

struct mw_replicas {
    mw_replicas_env env;
    mw_kernels kt;
    int ngpu;
    gpu_dev *gd;          /* ngpu devices (owned) */
    mw_nccl *nccl;        /* gradient all-reduce over every device of the cluster */
    mw_gpu_overlap *ov;   /* --overlap-allreduce on, where it runs (open_overlap) */
    double acc[MW_SUMS];  /* running sums (replicas.h) */
    double acc0[MW_SUMS]; /* acc before this step: a skipped step's sums are dropped */
    int reg_pending;      /* the penalty downloads of this step land at the update's wait */
    float reg_ls;         /* the loss scale the penalty's gradient was made with (its loss: / it) */
    int summed;           /* gpu_finite waited for this step's sums */
    long gb;              /* this step's global batch: the metrics' divisor */
    long step;            /* this step, for messages */
    int sync_c;           /* synchronized BN: the most channels of such a layer (0: none) */
    double *stot;         /* synchronized BN: the lockstep's host sums (lockstep.h) */
    long scnt[MAX_GPUS];  /* synchronized BN: this step's examples on each device */
    struct {              /* the next step's batch (gpu_prefetch), staged by gpu_update */
        const mw_dataset *d;
        const uint32_t *ids;
        long gb;
        uint64_t dseed;
        int state; /* 0 none, 1 asked for, 2 staged */
    } next;
};

#endif
