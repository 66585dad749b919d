/* CUDA graphs' primitives (graph.h: mw_cuda_step_seed, mw_cuda_capture_begin/_end,
 * mw_cuda_graph_launch/_free). What is captured and when is the GPU backend's
 * (worker/replicas/gpu_graphs.c); here are the stream capture, the instantiation and the launch,
 * and the one per-step value the captured kernels read from device memory, dropout's seed.
 *
 * A capture is thread-local (cudaStreamCaptureModeThreadLocal): other threads of the rank (the
 * MPI progress, a watchdog) may call CUDA meanwhile. A wrapper that fails inside a capture
 * records its failure on the context as always, and the later wrappers do nothing; at the end
 * that failure, or CUDA's own refusal (a call that cannot be captured invalidates the capture),
 * is handed back as the reason and the context's status and the error message are put back as
 * they were: nothing of a capture runs, so a failed one is a fallback, not a failed device. */
#include <stdio.h>

#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/cuda/graph.h"
}

static __global__ void seed_kernel(uint64_t *at, uint64_t seed)
{
    *at = seed;
}

extern "C" mw_status mw_cuda_step_seed(const mw_kctx *k, uint64_t seed)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_cuda_step_seed");
    if (!d)
        return mw_cuda_last_status(k);
    if (d->capturing)
        return mw_err(MW_EINTERNAL, "mw_cuda_step_seed inside a capture: a graph would keep the "
                                    "seed of the step it was captured in");
    if (d->seed_set && d->seed_host == seed) /* the word holds it already, in stream order */
        return MW_OK;
    /* by value: the launch copies it, the host keeps nothing alive */
    seed_kernel<<<1, 1, 0, d->stream>>>(d->seed_dev, seed);
    if (!mw_cuda_note(d, mw_cuda_launched_("seed_kernel", __FILE__, __LINE__)))
        return d->status;
    d->seed_host = seed;
    d->seed_set = true;
    return MW_OK;
}

extern "C" mw_status mw_cuda_capture_begin(const mw_kctx *k)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_cuda_capture_begin");
    if (!d)
        return mw_cuda_last_status(k);
    if (d->sync_each)
        return mw_err(MW_EDEVICE, "MW_CUDA_SYNC=1 waits after every kernel, which a captured "
                                  "graph cannot");
    if (d->capturing)
        return mw_err(MW_EINTERNAL, "mw_cuda_capture_begin: CUDA device %d is capturing already",
                      d->device);
    d->msg_before = mw_err_msg()[0] != '\0';
    MW_TRY(MW_CUDA(cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal)));
    d->capturing = true;
    return MW_OK;
}

extern "C" mw_status mw_cuda_capture_end(const mw_kctx *k, void **exec, char *why, size_t why_len)
{
    *exec = NULL;
    if (why_len)
        why[0] = '\0';
    mw_cuda_dev *d = k ? (mw_cuda_dev *)k->dev : NULL;
    if (!d || !d->capturing)
        return mw_err(MW_EINTERNAL, "mw_cuda_capture_end: no capture was begun");
    d->capturing = false;
    cudaGraph_t graph = NULL;
    const cudaError_t ended = cudaStreamEndCapture(d->stream, &graph);
    if (d->status != MW_OK) /* a wrapper's failure: the first one, with its place */
        snprintf(why, why_len, "%s", mw_err_msg());
    else if (ended != cudaSuccess)
        snprintf(why, why_len, "cudaStreamEndCapture: %s", cudaGetErrorString(ended));
    cudaGraphExec_t x = NULL;
    if (!why[0]) {
        const cudaError_t e = cudaGraphInstantiate(&x, graph, 0);
        if (e != cudaSuccess) {
            snprintf(why, why_len, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
            x = NULL;
        }
    }
    if (graph)
        (void)cudaGraphDestroy(graph);
    if (!why[0]) {
        *exec = x;
        return MW_OK;
    }
    (void)cudaGetLastError(); /* nothing of it is left for a later launch check */
    d->status = MW_OK;
    if (!d->msg_before)
        mw_err_clear();
    return MW_EDEVICE;
}

extern "C" mw_status mw_cuda_graph_launch(const mw_kctx *k, void *exec)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_cuda_graph_launch");
    if (!d)
        return mw_cuda_last_status(k);
    if (!mw_cuda_note(d, MW_CUDA(cudaGraphLaunch((cudaGraphExec_t)exec, d->stream))))
        return d->status;
    mw_cuda_progress_mark_(d); /* a wait's deadline counts from the graph's end too */
    return MW_OK;
}

extern "C" void mw_cuda_graph_free(void *exec)
{
    if (exec)
        MW_CUDA(cudaGraphExecDestroy((cudaGraphExec_t)exec));
}
