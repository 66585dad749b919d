/* The CUDA backend's runtime (runtime.cu): device discovery, the CUDA kernel context's streams,
 * marks and scratch, device memory and copies. The context is opened and closed by context.h,
 * the table filled by table.h. Plain C with no CUDA types, so the worker and the
 * tests include it; it is compiled into the CUDA module (worker/replicas/device.h) with
 * the GPU backend, and a CPU run never loads it.
 *
 * A CUDA context is an mw_kctx whose dev points at the backend state (device,
 * stream, cuBLAS handle bound to that stream) and whose ws is DEVICE scratch.
 * The CUDA twins (mw_*_cuda in conv2d.h, maxpool.h, ...) take device pointers
 * and only enqueue work on the context's stream; they return nothing, so a
 * failure (launch error, cuBLAS error, workspace too small, no context) is
 * recorded twice: with mw_err() (first message wins) and in the context's
 * sticky status. Once a context has failed, later kernels on it do nothing.
 * Callers check once per step:
 *
 *     t.conv2d_fwd(&k, y, x, w, b, &g, n);  ...  t.adam_step(&k, ...);
 *     MW_TRY(mw_cuda_sync(&k));   // waits, returns the first failure
 *
 * Errors raised while the device runs a kernel (an illegal address) surface at
 * the next synchronizing call. Setting MW_CUDA_SYNC=1 in the environment when
 * the context is opened synchronizes after every kernel, so the message names
 * the op that failed (slow; for debugging). */
#ifndef MW_KERNELS_CUDA_RUNTIME_H
#define MW_KERNELS_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device scratch floats a new context gets (16 MiB): enough for the default
 * CNN's convolutions at 64 images per replica without chunking. */
#define MW_CUDA_WS_DEFAULT ((size_t)1 << 22)
/* The most device scratch the GPU backend reserves for the conv chunks (256 MiB; more only
 * when one image alone needs more): mw_conv2d_ws_capped. */
#define MW_CUDA_WS_CAP ((size_t)1 << 26)

/* Number of usable CUDA devices: 0 when built without CUDA or when there is no
 * driver or device. Never aborts and records no error. */
int mw_cuda_device_count(void);

/* Grow k's device scratch to at least ws_count floats (waits for the stream
 * first). The conv kernels chunk the batch to fit, but need at least
 * mw_conv2d_ws_min floats; mw_conv2d_ws_count is the no-chunking size. */
mw_status mw_cuda_ws_reserve(mw_kctx *k, size_t ws_count);
/* Wait for everything enqueued on k's streams (polled, under mw_cuda_set_timeout's limit).
 * Returns the context's first failure: one recorded by a kernel, a copy, or this wait. */
mw_status mw_cuda_sync(const mw_kctx *k);
/* The context's first recorded failure so far, without waiting (MW_OK when
 * none; MW_EDEVICE when k is not an open CUDA context). */
mw_status mw_cuda_last_status(const mw_kctx *k);

/* Make k's device the calling thread's current device (the kernels do this
 * themselves; allocations need it: a rank driving several GPUs activates each
 * context before allocating its memory). MW_EDEVICE when k is not an open CUDA
 * context or has failed. */
mw_status mw_cuda_activate(const mw_kctx *k);

/* Device memory (on the current device: open or activate the context first).
 * nbytes 0 gives NULL and MW_OK. Free accepts NULL. */
mw_status mw_cuda_alloc(void **p, size_t nbytes);
void mw_cuda_free(void *p);
/* Pinned (page-locked) host memory, so uploads and downloads are truly
 * asynchronous. nbytes 0 gives NULL and MW_OK. Free accepts NULL. */
mw_status mw_cuda_host_alloc(void **p, size_t nbytes);
void mw_cuda_host_free(void *p);

/* Enqueue a copy on k's stream and return without waiting: the host buffer
 * must stay untouched (upload) or unread (download) until mw_cuda_sync(k).
 * From pageable host memory the copies still work, only less asynchronously. */
mw_status mw_cuda_upload(void *dst_dev, const void *src_host, size_t nbytes, const mw_kctx *k);
mw_status mw_cuda_download(void *dst_host, const void *src_dev, size_t nbytes, const mw_kctx *k);
/* Enqueue dst_dev[0..nbytes) = 0 on k's stream (gradients before a step). */
mw_status mw_cuda_zero(void *dst_dev, size_t nbytes, const mw_kctx *k);

/* One line for logs and --version, e.g. "CUDA runtime 13.0, driver 13.0,
 * cuBLAS 13.0.2, 1 device (0: NVIDIA H100 80GB HBM3, sm_90)" or "CUDA runtime
 * 13.0, cuBLAS 13.0.2, no device (cudaGetDeviceCount: ...)"; "CUDA: not built"
 * without CUDA. Static storage; never NULL. */
const char *mw_cuda_version_string(void);

/* on: let cuBLAS and cuDNN use TF32 tensor cores (--tf32: faster on Ampere and later, with
 * inputs rounded to 10 mantissa bits); off (a new context's default): plain FP32. */
mw_status mw_cuda_set_tf32(const mw_kctx *k, int on);
/* Marks on k's stream (CUDA events), MW_CUDA_MARKS of them: mw_cuda_mark records slot now in
 * stream order; mw_cuda_wait_mark waits until the stream has passed it, polling (never
 * blocking in CUDA) with timeout seconds (<= 0: forever) counted from the device's last
 * progress (mw_cuda_progress): past it MW_ETIMEOUT "collective timeout: <what> waited S s for
 * CUDA device D, I s since it last finished a kernel (--collective-timeout T)". A slot never
 * marked is passed. */
#define MW_CUDA_MARKS 3
mw_status mw_cuda_mark(const mw_kctx *k, int slot);
mw_status mw_cuda_wait_mark(const mw_kctx *k, int slot, double timeout, const char *what);

/* The copy stream: each context has a second stream for host-to-device copies that overlap
 * the compute stream's work (the next batch's upload while this step's update runs). The two
 * streams are ordered by marks on the device, with no host wait:
 *   mw_cuda_upload_copy    enqueues an upload on the copy stream (the host buffer stays
 *                          untouched until the copy mark after it is passed);
 *   mw_cuda_copy_mark      records copy mark slot behind what the copy stream has so far;
 *   mw_cuda_compute_after  makes the compute stream wait for copy mark slot;
 *   mw_cuda_copy_after     makes the copy stream wait for the compute stream's mark slot;
 *   mw_cuda_wait_copy_mark waits on the host, polled as mw_cuda_wait_mark, for copy mark slot.
 * A slot never marked is passed. mw_cuda_sync waits for both streams. */
#define MW_CUDA_COPY_MARKS 2
mw_status mw_cuda_upload_copy(void *dst_dev, const void *src_host, size_t nbytes, const mw_kctx *k);
mw_status mw_cuda_copy_mark(const mw_kctx *k, int slot);
mw_status mw_cuda_compute_after(const mw_kctx *k, int slot);
mw_status mw_cuda_copy_after(const mw_kctx *k, int slot);
mw_status mw_cuda_wait_copy_mark(const mw_kctx *k, int slot, double timeout, const char *what);
/* The reduce stream: a third stream per context, for the gradient all-reduce's buckets (the
 * GPU backend's --overlap-allreduce), so they run beside the backward still on the compute
 * stream. No host wait between the two:
 *   mw_cuda_reduce_stream         the stream as a cudaStream_t behind void * (NCCL's), NULL
 *                                 when k is not an open CUDA context; borrowed;
 *   mw_cuda_reduce_after_compute  the reduce stream waits for what the compute stream has so
 *                                 far (a bucket's last backward kernel);
 *   mw_cuda_compute_after_reduce  the compute stream waits for what the reduce stream has so
 *                                 far (the update after the last bucket).
 * mw_cuda_sync waits for it too. */
void *mw_cuda_reduce_stream(const mw_kctx *k);
mw_status mw_cuda_reduce_after_compute(const mw_kctx *k);
mw_status mw_cuda_compute_after_reduce(const mw_kctx *k);
/* Enqueue dst_dev[0..nbytes) = src_dev[0..nbytes) on k's compute stream (one device). */
mw_status mw_cuda_copy(void *dst_dev, const void *src_dev, size_t nbytes, const mw_kctx *k);

/* The longest any host wait inside the backend may go on with the device making no progress
 * (mw_cuda_sync, growing the scratch, reading a gradient norm back), in seconds, 0 (a new
 * context's default) for no limit: the GPU backend passes --collective-timeout, so a hung device
 * ends the job with MW_ETIMEOUT instead of blocking its rank, and a long step that keeps
 * finishing kernels does not. */
mw_status mw_cuda_set_timeout(const mw_kctx *k, double seconds);

/* How far k's compute stream has got: the number of its progress marks passed so far. Every
 * MW_CUDA_PROGRESS_EVERY-th kernel wrapper records one behind its kernel (at most
 * MW_CUDA_PROGRESS in flight), so the count grows while the device works through what it was
 * given and stands still when it is stopped, or idle, or blocked in a collective that waits for
 * a peer. Every host wait of the backend measures its deadline from the count's last move
 * (common/timer.h's mw_stall), not from its own start: the host enqueues a whole step before it
 * waits, and the deadline is the collective's, not the step's. Non-decreasing; a context that
 * failed keeps its last count; 0 when k is not an open CUDA context. 64 x 16 = 1024 kernels
 * in flight marked, about as many launches as CUDA queues before the host blocks: no long
 * unmarked stretch at the end of a step the host ran ahead of. */
#define MW_CUDA_PROGRESS 64
#define MW_CUDA_PROGRESS_EVERY 16
long mw_cuda_progress(const mw_kctx *k);

/* How many Dense + activation calls (dense_act_fwd) on k ran unfused because cuBLASLt offered no
 * algorithm for their shape or alignment (kernels/cuda/gemm.cuh: mw_cuda_gemm_lt); 0 when k is
 * not an open CUDA context. test_cuda holds it at 0 where the fused path must be taken. */
long mw_cuda_lt_unfused(const mw_kctx *k);

/* k's stream as a cudaStream_t behind void * (for NCCL calls on the same stream), or NULL
 * when k is not an open CUDA context. Borrowed. */
void *mw_cuda_stream(const mw_kctx *k);

/* Usable CUDA devices (the module's probe, after worker/replicas/device.c's driver probe). When the
 * answer is not positive and reason is non-NULL, it receives why: "cudaGetDeviceCount: <CUDA's
 * error string>" or "cudaGetDeviceCount found 0 devices". Records no error. */
int mw_cuda_probe(char *reason, size_t reason_len);

#ifdef __cplusplus
}
#endif

#endif
