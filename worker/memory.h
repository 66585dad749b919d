/* Memory checked before it is used: what a run will allocate on this rank, estimated from
 * the flags and the model before the big allocations, against what the process may use
 * (common/sysmem.h: the cgroup limit, or MemAvailable).
 *
 * A run that does not fit would otherwise grow until the kernel's OOM killer ends it with
 * SIGKILL (exit 137), which schedulers read as worth a restart: the job would restart into
 * the same death. Refused here, it ends in set-up with MW_ENOMEM (exit 6, do not retry) and
 * one message that says what takes the memory and which flag to lower.
 *
 * The estimate is made from shapes alone: the model planned (mw_model_plan) but its
 * parameter arena not yet allocated, the data's arrays as the readers loaded them (each
 * reader checks its own load first, mw_sysmem_check_load).
 *
 * What the estimate counts (bytes on this rank):
 *   activations  threads x mw_model_ws_nbytes(model, per_thread): every thread's
 *                workspace, per_thread = mw_cpu_examples_per_thread (0 on a GPU: device
 *                memory, which the GPU backend's allocations check themselves)
 *   gradients    one gradient buffer of the padded parameter count per thread, one in all
 *                for a BatchNormalization model (mw_cpu_grad_arenas)
 *   model        parameters and optimizer slots m1, m2 (three arenas), plus the three
 *                copies and the serialized buffer a checkpoint takes while it is written
 *   data         train and test images (uint8) and targets (int32 labels or float32
 *                values) as loaded, and the epoch order (train count + 1 ids); encoded
 *                images (image folders, TFRecord shards) instead: their tables, each
 *                decoding thread's largest file and resized image, the decoding pool's cache
 *   margin       MW_MEMORY_MARGIN for what the libraries take (MPI, OpenMP, BLAS, libc)
 * The ranks of a node share its memory (and its cgroup): each gets available / ranks.
 * MW_MEMORY_CHECK=off in the environment skips the check (unusual systems). */
#ifndef MW_WORKER_MEMORY_H
#define MW_WORKER_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/sysmem.h"
#include "worker/data/data.h"
#include "worker/model/model.h"
#include "worker/opts.h"

/* The libraries' share: MPI's buffers and shared-memory segments, the OpenMP and BLAS
 * thread pools and stacks, libc's arenas, the binary. 64 MiB. */
#define MW_MEMORY_MARGIN (UINT64_C(64) << 20)

typedef struct {
    uint64_t activations, gradients, model, data, margin; /* bytes, as above */
    uint64_t total;                                       /* their sum */
    int threads;    /* compute threads the activations and gradients are for */
    int per_thread; /* examples one thread's workspace holds */
} mw_memory_estimate;

/* The estimate for a run of o with this model and data on nthreads CPU threads (one on a
 * GPU, whose activations are not host memory). test may be NULL. */
void mw_memory_estimate_run(mw_memory_estimate *e, const mw_model *m, const mw_dataset *train,
                            const mw_dataset *test, const mw_train_opts *o, int nthreads,
                            int on_gpu);
/* The estimate of `export`: the model's arenas and a checkpoint's copies (no data, no
 * device, no workspace). */
void mw_memory_estimate_export(mw_memory_estimate *e, const mw_model *m);
/* 0 when MW_MEMORY_CHECK is "off" (or "0", "no", "false"), else 1. */
int mw_memory_check_enabled(void);
/* MW_ENOMEM, with the estimate broken down, the limit and its source, and the flags to
 * lower, when e->total is more than mem->available / local_ranks; else MW_OK. */
mw_status mw_memory_check(const mw_memory_estimate *e, const mw_sysmem *mem, int local_ranks,
                          const mw_train_opts *o);
/* "memory: about 136.2 MiB per rank (activations ...); 22.9 GiB available to it
 * (/proc/meminfo: ...)" for the --verbose log; returns buf. */
const char *mw_memory_describe(const mw_memory_estimate *e, const mw_sysmem *mem, int local_ranks,
                               char *buf, size_t nbytes);

#endif
