/* The CUDA runtime side of the backend: device discovery, the contexts' streams, marks and
 * scratch (context.cu opens and closes them), memory and copies, the per-context sticky
 * status, and the check helpers every .cu file uses.
 *
 * Nothing here aborts: a missing driver or device is an ordinary answer (no
 * devices), and every CUDA/cuBLAS failure becomes mw_err(MW_EDEVICE, ...). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/runtime.cuh"
#include "kernels/cuda/runtime.h"

extern "C" {
#include "common/timer.h"
}

/* Short form of __FILE__ (from "kernels/" on), so messages read the same
 * however nvcc was given the path. */
static const char *short_file(const char *file)
{
    const char *p = strstr(file, "kernels/cuda/");
    return p ? p : file;
}

/* "cudaMemcpyAsync(dst, ...)" -> length of "cudaMemcpyAsync". */
static int call_name_len(const char *call)
{
    return (int)strcspn(call, "( ");
}

mw_status mw_cuda_check_(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return MW_OK;
    return mw_err(MW_EDEVICE, "%s:%d: %.*s: %s", short_file(file), line, call_name_len(call), call,
                  cudaGetErrorString(e));
}

mw_status mw_cublas_check_(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return MW_OK;
    return mw_err(MW_EDEVICE, "%s:%d: %.*s: %s (%s)", short_file(file), line, call_name_len(call),
                  call, cublasGetStatusString(s), cublasGetStatusName(s));
}

mw_status mw_cuda_launched_(const char *name, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return MW_OK;
    return mw_err(MW_EDEVICE, "%s:%d: %s<<<>>>: %s", short_file(file), line, name,
                  cudaGetErrorString(e));
}

bool mw_cuda_note(mw_cuda_dev *d, mw_status rc)
{
    if (rc != MW_OK && d->status == MW_OK)
        d->status = rc;
    return rc == MW_OK;
}

mw_cuda_dev *mw_cuda_begin(const mw_kctx *k, const char *op)
{
    if (!k || !k->dev) {
        mw_err(MW_EDEVICE, "%s: not a CUDA context (open it with mw_cuda_ctx_open)", op);
        return NULL;
    }
    mw_cuda_dev *d = (mw_cuda_dev *)k->dev;
    if (d->status != MW_OK)
        return NULL;
    int cur = -1;
    if (!mw_cuda_note(d, MW_CUDA(cudaGetDevice(&cur))))
        return NULL;
    if (cur != d->device && !mw_cuda_note(d, MW_CUDA(cudaSetDevice(d->device))))
        return NULL;
    return d;
}

long mw_cuda_progress_(mw_cuda_dev *d)
{
    while (d->prog_done < d->prog_issued) {
        cudaError_t q = cudaEventQuery(d->progress[d->prog_done % MW_CUDA_PROGRESS]);
        if (q != cudaSuccess) {
            /* not passed yet (an error is the waits' own query's to report); a not-ready code
             * is not left behind for a later launch check */
            if (q == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady)
                (void)cudaGetLastError();
            break;
        }
        d->prog_done++;
    }
    return d->prog_done;
}

/* A progress mark behind what d's stream has so far, in the ring's next slot once the mark
 * there before has passed (with every slot in flight the oldest one shows progress anyway). */
void mw_cuda_progress_mark_(mw_cuda_dev *d)
{
    if (d->prog_issued - mw_cuda_progress_(d) >= MW_CUDA_PROGRESS)
        return;
    if (mw_cuda_note(
            d, MW_CUDA(cudaEventRecord(d->progress[d->prog_issued % MW_CUDA_PROGRESS], d->stream))))
        d->prog_issued++;
}

void mw_cuda_end(mw_cuda_dev *d, const char *op)
{
    if (d->status != MW_OK)
        return;
    if (!d->capturing && ++d->prog_calls % MW_CUDA_PROGRESS_EVERY == 0)
        mw_cuda_progress_mark_(d);
    if (!d->sync_each || d->status != MW_OK)
        return;
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e != cudaSuccess)
        mw_cuda_note(d, mw_err(MW_EDEVICE, "%s (MW_CUDA_SYNC): cudaStreamSynchronize: %s", op,
                               cudaGetErrorString(e)));
}

extern "C" int mw_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        n = 0;
    (void)cudaGetLastError(); /* leave no pending error behind */
    return n;
}

extern "C" int mw_cuda_probe(char *reason, size_t reason_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError(); /* leave no pending error behind */
    if (e != cudaSuccess)
        n = 0;
    if (n <= 0 && reason && reason_len) {
        if (e != cudaSuccess)
            snprintf(reason, reason_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        else
            snprintf(reason, reason_len, "cudaGetDeviceCount found 0 devices");
    }
    return n;
}

extern "C" void *mw_cuda_stream(const mw_kctx *k)
{
    if (!k || !k->dev)
        return NULL;
    return (void *)((const mw_cuda_dev *)k->dev)->stream;
}

extern "C" void *mw_cuda_reduce_stream(const mw_kctx *k)
{
    if (!k || !k->dev)
        return NULL;
    return (void *)((const mw_cuda_dev *)k->dev)->reduce;
}

/* The state behind k for a helper that returns a status. */
static mw_status ctx_of(const mw_kctx *k, const char *what, mw_cuda_dev **out)
{
    if (!k || !k->dev)
        return mw_err(MW_EDEVICE, "%s: not a CUDA context (open it with mw_cuda_ctx_open)", what);
    mw_cuda_dev *d = (mw_cuda_dev *)k->dev;
    if (d->status != MW_OK)
        return d->status;
    int cur = -1;
    if (!mw_cuda_note(d, MW_CUDA(cudaGetDevice(&cur))))
        return d->status;
    if (cur != d->device && !mw_cuda_note(d, MW_CUDA(cudaSetDevice(d->device))))
        return d->status;
    *out = d;
    return MW_OK;
}

extern "C" mw_status mw_cuda_activate(const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    return ctx_of(k, "mw_cuda_activate", &d);
}

extern "C" mw_status mw_cuda_ws_reserve(mw_kctx *k, size_t ws_count)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_ws_reserve", &d));
    if (ws_count <= k->ws_count)
        return MW_OK;
    MW_TRY(mw_cuda_wait_idle_(d, d->stream, "growing the device scratch"));
    if (!mw_cuda_note(d, MW_CUDA(cudaFree(k->ws))))
        return d->status;
    k->ws = NULL;
    k->ws_count = 0;
    /* An allocation failure leaves the context usable (with no scratch). */
    MW_TRY(MW_CUDA(cudaMalloc((void **)&k->ws, ws_count * sizeof(float))));
    k->ws_count = ws_count;
    return MW_OK;
}

extern "C" mw_status mw_cuda_sync(const mw_kctx *k)
{
    if (!k || !k->dev)
        return mw_err(MW_EDEVICE, "mw_cuda_sync: not a CUDA context");
    mw_cuda_dev *d = (mw_cuda_dev *)k->dev;
    /* Wait even after a failure, so no work is left in flight. */
    if (cudaSetDevice(d->device) == cudaSuccess) {
        mw_cuda_wait_idle_(d, d->copy, "a device synchronization");
        mw_cuda_wait_idle_(d, d->reduce, "a device synchronization");
        mw_cuda_wait_idle_(d, d->stream, "a device synchronization");
    }
    return d->status;
}

mw_status mw_cuda_wait_event_(mw_cuda_dev *d, cudaEvent_t e, double timeout, const char *what)
{
    const struct timespec nap = {0, 20000};
    const double t0 = mw_now();
    mw_stall st;
    mw_stall_start(&st, mw_cuda_progress_(d));
    for (unsigned long spin = 0;; spin++) {
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaSuccess)
            return MW_OK;
        if (q != cudaErrorNotReady)
            return MW_CUDA(q);
        if (spin % 64 != 63)
            continue;
        const double idle = mw_stall_idle(&st, mw_cuda_progress_(d));
        if (timeout > 0 && idle > timeout)
            return mw_err(MW_ETIMEOUT,
                          "collective timeout: %s waited %.0f s for CUDA device %d, %.0f s since "
                          "it last finished a kernel (--collective-timeout %.0f)",
                          what, mw_now() - t0, d->device, idle, timeout);
        if (spin > 4096)
            nanosleep(&nap, NULL);
    }
}

mw_status mw_cuda_wait_idle_(mw_cuda_dev *d, cudaStream_t s, const char *what)
{
    mw_status rc = MW_CUDA(cudaEventRecord(d->idle, s));
    if (rc == MW_OK)
        rc = mw_cuda_wait_event_(d, d->idle, d->timeout, what);
    mw_cuda_note(d, rc);
    return rc;
}

extern "C" mw_status mw_cuda_set_timeout(const mw_kctx *k, double seconds)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_set_timeout", &d));
    d->timeout = seconds > 0 ? seconds : 0;
    return MW_OK;
}

extern "C" long mw_cuda_progress(const mw_kctx *k)
{
    if (!k || !k->dev)
        return 0;
    mw_cuda_dev *d = (mw_cuda_dev *)k->dev;
    if (d->status != MW_OK || cudaSetDevice(d->device) != cudaSuccess)
        return d->prog_done;
    return mw_cuda_progress_(d);
}

extern "C" long mw_cuda_lt_unfused(const mw_kctx *k)
{
    return k && k->dev ? ((const mw_cuda_dev *)k->dev)->lt_unfused : 0;
}

extern "C" mw_status mw_cuda_set_tf32(const mw_kctx *k, int on)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_set_tf32", &d));
    d->tf32 = on != 0;
    return MW_CUBLAS(
        cublasSetMathMode(d->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

extern "C" mw_status mw_cuda_mark(const mw_kctx *k, int slot)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_mark", &d));
    if (slot < 0 || slot >= MW_CUDA_MARKS)
        return mw_err(MW_EINTERNAL, "mw_cuda_mark: slot %d of %d", slot, MW_CUDA_MARKS);
    mw_cuda_note(d, MW_CUDA(cudaEventRecord(d->marks[slot], d->stream)));
    d->marked[slot] = 1;
    return d->status;
}

extern "C" mw_status mw_cuda_wait_mark(const mw_kctx *k, int slot, double timeout, const char *what)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_wait_mark", &d));
    if (slot < 0 || slot >= MW_CUDA_MARKS)
        return mw_err(MW_EINTERNAL, "mw_cuda_wait_mark: slot %d of %d", slot, MW_CUDA_MARKS);
    if (!d->marked[slot])
        return MW_OK;
    mw_status rc = mw_cuda_wait_event_(d, d->marks[slot], timeout, what);
    if (rc != MW_ETIMEOUT) /* a timeout is the caller's to report; the device may yet finish */
        mw_cuda_note(d, rc);
    return rc != MW_OK ? rc : d->status;
}

/* ---- the copy stream ---------------------------------------------------------------------- */

static mw_status copy_slot(const mw_kctx *k, const char *what, int slot, int count, mw_cuda_dev **d)
{
    MW_TRY(ctx_of(k, what, d));
    if (slot < 0 || slot >= count)
        return mw_err(MW_EINTERNAL, "%s: slot %d of %d", what, slot, count);
    return MW_OK;
}

extern "C" mw_status mw_cuda_upload_copy(void *dst_dev, const void *src_host, size_t nbytes,
                                         const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_upload_copy", &d));
    if (nbytes == 0)
        return MW_OK;
    mw_cuda_note(
        d, MW_CUDA(cudaMemcpyAsync(dst_dev, src_host, nbytes, cudaMemcpyHostToDevice, d->copy)));
    return d->status;
}

extern "C" mw_status mw_cuda_copy_mark(const mw_kctx *k, int slot)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(copy_slot(k, "mw_cuda_copy_mark", slot, MW_CUDA_COPY_MARKS, &d));
    mw_cuda_note(d, MW_CUDA(cudaEventRecord(d->copy_marks[slot], d->copy)));
    d->copy_marked[slot] = 1;
    return d->status;
}

extern "C" mw_status mw_cuda_compute_after(const mw_kctx *k, int slot)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(copy_slot(k, "mw_cuda_compute_after", slot, MW_CUDA_COPY_MARKS, &d));
    if (d->copy_marked[slot])
        mw_cuda_note(d, MW_CUDA(cudaStreamWaitEvent(d->stream, d->copy_marks[slot], 0)));
    return d->status;
}

/* Stream `to` of k's context waits, on the device, for what stream `from` has so far (through
 * the event the member ev names). */
static mw_status stream_after(const mw_kctx *k, const char *what, cudaEvent_t mw_cuda_dev::*ev,
                              cudaStream_t mw_cuda_dev::*from, cudaStream_t mw_cuda_dev::*to)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, what, &d));
    if (mw_cuda_note(d, MW_CUDA(cudaEventRecord(d->*ev, d->*from))))
        mw_cuda_note(d, MW_CUDA(cudaStreamWaitEvent(d->*to, d->*ev, 0)));
    return d->status;
}

extern "C" mw_status mw_cuda_reduce_after_compute(const mw_kctx *k)
{
    return stream_after(k, "mw_cuda_reduce_after_compute", &mw_cuda_dev::to_reduce,
                        &mw_cuda_dev::stream, &mw_cuda_dev::reduce);
}

extern "C" mw_status mw_cuda_compute_after_reduce(const mw_kctx *k)
{
    return stream_after(k, "mw_cuda_compute_after_reduce", &mw_cuda_dev::to_compute,
                        &mw_cuda_dev::reduce, &mw_cuda_dev::stream);
}

extern "C" mw_status mw_cuda_copy_after(const mw_kctx *k, int slot)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(copy_slot(k, "mw_cuda_copy_after", slot, MW_CUDA_MARKS, &d));
    if (d->marked[slot])
        mw_cuda_note(d, MW_CUDA(cudaStreamWaitEvent(d->copy, d->marks[slot], 0)));
    return d->status;
}

extern "C" mw_status mw_cuda_wait_copy_mark(const mw_kctx *k, int slot, double timeout,
                                            const char *what)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(copy_slot(k, "mw_cuda_wait_copy_mark", slot, MW_CUDA_COPY_MARKS, &d));
    if (!d->copy_marked[slot])
        return MW_OK;
    mw_status rc = mw_cuda_wait_event_(d, d->copy_marks[slot], timeout, what);
    if (rc != MW_ETIMEOUT)
        mw_cuda_note(d, rc);
    return rc != MW_OK ? rc : d->status;
}

extern "C" mw_status mw_cuda_copy(void *dst_dev, const void *src_dev, size_t nbytes,
                                  const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_copy", &d));
    if (nbytes == 0)
        return MW_OK;
    mw_cuda_note(
        d, MW_CUDA(cudaMemcpyAsync(dst_dev, src_dev, nbytes, cudaMemcpyDeviceToDevice, d->stream)));
    return d->status;
}

extern "C" mw_status mw_cuda_last_status(const mw_kctx *k)
{
    if (!k || !k->dev)
        return MW_EDEVICE;
    return ((mw_cuda_dev *)k->dev)->status;
}

extern "C" mw_status mw_cuda_alloc(void **p, size_t nbytes)
{
    *p = NULL;
    if (nbytes == 0)
        return MW_OK;
    mw_status rc = MW_CUDA(cudaMalloc(p, nbytes));
    if (rc != MW_OK)
        *p = NULL;
    return rc;
}

extern "C" void mw_cuda_free(void *p)
{
    if (p)
        MW_CUDA(cudaFree(p));
}

extern "C" mw_status mw_cuda_host_alloc(void **p, size_t nbytes)
{
    *p = NULL;
    if (nbytes == 0)
        return MW_OK;
    mw_status rc = MW_CUDA(cudaMallocHost(p, nbytes));
    if (rc != MW_OK)
        *p = NULL;
    return rc;
}

extern "C" void mw_cuda_host_free(void *p)
{
    if (p)
        MW_CUDA(cudaFreeHost(p));
}

extern "C" mw_status mw_cuda_upload(void *dst_dev, const void *src_host, size_t nbytes,
                                    const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_upload", &d));
    if (nbytes == 0)
        return MW_OK;
    mw_cuda_note(
        d, MW_CUDA(cudaMemcpyAsync(dst_dev, src_host, nbytes, cudaMemcpyHostToDevice, d->stream)));
    return d->status;
}

extern "C" mw_status mw_cuda_download(void *dst_host, const void *src_dev, size_t nbytes,
                                      const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_download", &d));
    if (nbytes == 0)
        return MW_OK;
    mw_cuda_note(
        d, MW_CUDA(cudaMemcpyAsync(dst_host, src_dev, nbytes, cudaMemcpyDeviceToHost, d->stream)));
    return d->status;
}

extern "C" mw_status mw_cuda_zero(void *dst_dev, size_t nbytes, const mw_kctx *k)
{
    mw_cuda_dev *d = NULL;
    MW_TRY(ctx_of(k, "mw_cuda_zero", &d));
    if (nbytes == 0)
        return MW_OK;
    mw_cuda_note(d, MW_CUDA(cudaMemsetAsync(dst_dev, 0, nbytes, d->stream)));
    return d->status;
}

static char version[512];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void)
{
    size_t len = 0;
    int rt = 0, drv = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (len < sizeof version)                                                                  \
            len += (size_t)snprintf(version + len, sizeof version - len, __VA_ARGS__);             \
    } while (0)
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
        APPEND("CUDA runtime %d.%d", rt / 1000, rt % 1000 / 10);
    else
        APPEND("CUDA runtime ?");
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
        APPEND(", driver %d.%d", drv / 1000, drv % 1000 / 10);
    int maj = 0, min = 0, pat = 0;
    if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
        APPEND(", cuBLAS %d.%d.%d", maj, min, pat);
    else
        APPEND(", cuBLAS %d.%d.%d (headers)", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        APPEND(", no device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    } else if (n == 0) {
        APPEND(", no device");
    } else {
        cudaDeviceProp p;
        APPEND(", %d device%s", n, n == 1 ? "" : "s");
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            APPEND(" (0: %s, sm_%d%d)", p.name, p.major, p.minor);
    }
    (void)cudaGetLastError();
#undef APPEND
}

extern "C" const char *mw_cuda_version_string(void)
{
    pthread_once(&version_once, version_init);
    return version;
}
