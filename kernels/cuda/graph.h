/* CUDA graphs' primitives (graph.cu): the stream capture, the instantiation and the launch, and
 * the step's dropout seed on the device. Plain C with no CUDA types, like runtime.h; compiled
 * into the CUDA module, and answered by the host stand-in (tests/hostdev.c) on fake devices. */
#ifndef MW_KERNELS_CUDA_GRAPH_H
#define MW_KERNELS_CUDA_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA graphs (--cuda-graphs on: worker/replicas/gpu_graphs.h decides what is captured, and
 * when). A capture records what the wrappers enqueue on k's compute stream between begin and end
 * instead of running it, each kernel's arguments as they are at the capture; a value that changes
 * from one replay to the next must come from device memory. A step has one such value, dropout's
 * seed:
 *   mw_cuda_step_seed      enqueues the write of seed into k's device word (outside a
 *                          capture); from then on the dropout and attention wrappers given that
 *                          seed read it there, so a graph replayed after the next step's
 *                          mw_cuda_step_seed draws the next step's masks;
 *   mw_cuda_capture_begin  starts capturing k's compute stream (thread-local: other threads
 *                          may call CUDA meanwhile); MW_EDEVICE where no capture can be made
 *                          (MW_CUDA_SYNC=1, a failed context);
 *   mw_cuda_capture_end    ends it, *exec the instantiated graph. Nothing of the capture ran.
 *                          When a wrapper failed inside it, or CUDA refused it (a call that
 *                          cannot be captured), MW_EDEVICE, the reason in why (why_len bytes),
 *                          and k's status and the error message as they were before the
 *                          capture: a failed capture is a fallback, not a failed device;
 *   mw_cuda_graph_launch   enqueues exec on k's compute stream, a progress mark behind it;
 *   mw_cuda_graph_free     releases exec (NULL allowed). */
mw_status mw_cuda_step_seed(const mw_kctx *k, uint64_t seed);
mw_status mw_cuda_capture_begin(const mw_kctx *k);
mw_status mw_cuda_capture_end(const mw_kctx *k, void **exec, char *why, size_t why_len);
mw_status mw_cuda_graph_launch(const mw_kctx *k, void *exec);
void mw_cuda_graph_free(void *exec);

#ifdef __cplusplus
}
#endif

#endif
