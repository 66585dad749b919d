/* The GPU backend's batch staging (gpu_stage.c): a micro-batch's examples assembled on the host
 * and uploaded on the copy stream, and the next step's first micro-batch staged while the update
 * runs (the prefetch). Private to the CUDA module. */
#ifndef MW_WORKER_REPLICAS_GPU_STAGE_H
#define MW_WORKER_REPLICAS_GPU_STAGE_H

#include "worker/replicas/gpu_backend.h"

/* Stage n examples of d on the host (ids, or first, first+1, ... when ids is NULL) into g's
 * next staging slot s, once that slot's last upload is done (a polled wait, passed at once
 * unless the device is two micro-batches behind); enqueue their upload on the copy stream into
 * device slot s, behind the compute mark after the last micro-batch that read it; make the
 * compute stream wait for the upload and copy the images into the workspace's input. The
 * caller marks s on the compute stream after the micro-batch's last kernel (done_with).
 * Training: dropout keyed by the examples' global ids. */
mw_status mw_gpu_stage(const mw_replicas *r, gpu_dev *g, const mw_dataset *d, const uint32_t *ids,
                       uint32_t first, int n, int training, uint64_t dseed);
/* After the last kernel of g's micro-batch staged last: its device slot may be refilled. */
mw_status mw_gpu_done_with(gpu_dev *g);
/* Whether the staged next batch is the training batch (d, ids, gb, dseed); either way the
 * request is used up (ids NULL: not a training batch). */
int mw_gpu_take_next(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                     uint64_t dseed);
/* The asked-for next batch (gpu_prefetch): each device's first micro-batch staged, its upload
 * enqueued behind this step's update. */
mw_status mw_gpu_stage_next(mw_replicas *r);
/* A device's first micro-batch of n examples: already staged (pre: the prefetched batch), or
 * staged now. */
mw_status mw_gpu_stage_first(const mw_replicas *r, gpu_dev *g, int pre, const mw_dataset *data,
                             const uint32_t *ids, uint32_t first, int n, int training,
                             uint64_t dseed);

#endif
