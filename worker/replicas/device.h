/* What a rank trains on (--device auto|cpu|gpu), and the CUDA module.
 *
 * The GPU backend and the CUDA kernels are a loadable module, mwtrain-cuda.so, next
 * to the binary; mwtrain itself links no CUDA library, so it starts (and trains on
 * the CPU) where CUDA is not installed. Deciding costs little:
 *
 *   1. --device cpu: the CPU; nothing is probed.
 *   2. The driver probe: dlopen("libcuda.so.1") alone, cuInit, cuDeviceGetCount.
 *      No driver, or no device: the CPU (auto), with an info line saying why.
 *   3. With devices: dlopen the module (its CUDA runtime, cuBLAS and NCCL come
 *      with it) and ask its runtime for the device count.
 *   4. Divide the node's devices among its ranks (mw_device_divide).
 *
 * A failure at 2 other than "no device" (a driver too old, a broken install), a
 * module that cannot be loaded at 3 (missing CUDA libraries) or a runtime that
 * disagrees with the driver is a WARNING with auto, which still trains on the CPU,
 * and an error (MW_EDEVICE, exit 7) with gpu: a cluster user must not end up on the
 * CPU without noticing.
 *
 * MW_CUDA_MODULE=PATH loads another module in place of steps 2-3 (its own probe
 * decides): the tests run the GPU loop on a host stand-in this way. */
#ifndef MW_WORKER_DEVICE_H
#define MW_WORKER_DEVICE_H

#include <stddef.h>

#include "common/status.h"
#include "worker/replicas/replicas.h"

/* The module's file name, looked up in the binary's directory. */
#define MW_GPU_MODULE_FILE "mwtrain-cuda.so"
/* Its one exported symbol: const mw_gpu_module *mw_gpu_module_get(void). */
#define MW_GPU_MODULE_ENTRY "mw_gpu_module_get"
#define MW_GPU_MODULE_ABI 3 /* 2: grads takes the step; 3: the prefetch op */

typedef struct {
    int abi; /* MW_GPU_MODULE_ABI */
    /* Devices the module's CUDA runtime sees; when not positive, reason says why. */
    int (*probe)(char *reason, size_t len);
    /* One line: runtime, cuBLAS, devices. Static storage. */
    const char *(*version)(void);
    const mw_replicas_ops *replicas; /* the GPU backend */
} mw_gpu_module;

/* What the probes found (steps 2-3 above). */
typedef struct {
    int count;        /* usable devices; 0: none; -1: this mwtrain was built without CUDA */
    int warn;         /* count <= 0 for another reason than "no device": say it loudly */
    char reason[384]; /* why count <= 0 */
} mw_device_probe;

/* The decision for one rank. */
typedef struct {
    int use_gpu; /* 1: devices [first, first + n) */
    int first, n;
    int warn;                    /* why is a warning, not information */
    char why[768];               /* one line for the log; may be empty */
    const mw_gpu_module *module; /* the loaded module when use_gpu (borrowed, never unloaded) */
} mw_device_choice;

/* Divide the count devices of a node among its local_size ranks (pure arithmetic). Local rank
 * local_rank drives devices [*first, *first + *n):
 *   local_size <= count  count / local_size devices each, in local-rank order: one rank per GPU
 *                        when equal, one rank driving every GPU when local_size == 1; the last
 *                        count % local_size devices stay idle.
 *   local_size > count   one device each, device local_rank % count: round-robin sharing, or
 *                        (with per-rank CUDA_VISIBLE_DEVICES) each rank's own GPU.
 * Returns how many of the node's ranks drive my device(s): 1 when not shared. Needs count >= 1
 * and 0 <= local_rank < local_size. */
int mw_device_divide(int local_rank, int local_size, int count, int *first, int *n);

/* The decision for a given probe answer (NULL: none taken, as for "cpu"), testable without
 * a device:
 *   "cpu"   the CPU.
 *   "auto"  its share of the GPUs when the probe found any, else the CPU and why.
 *   "gpu"   like auto, but no usable device is MW_EDEVICE naming the reason.
 * mode NULL means "auto"; anything else is MW_EINVAL "--device 'x': expected one of auto,
 * cpu, gpu". The chosen module is left NULL here. */
mw_status mw_device_select_with(const char *mode, const mw_device_probe *p, int local_rank,
                                int local_size, mw_device_choice *out);

/* Probe (steps 1-3) and decide; out->module is set when use_gpu. Every rank calls it with its
 * own local rank. */
mw_status mw_device_select(const char *mode, int local_rank, int local_size, mw_device_choice *out);

/* Steps 2-3 alone. */
void mw_device_probe_run(mw_device_probe *p);

/* The CUDA module, loaded once per process (dlopen; later calls return the same answer):
 * NULL when it cannot be loaded, with why (the path and the loader's message). */
const mw_gpu_module *mw_device_module(char *why, size_t len);

/* `mwtrain version`'s CUDA line: whether the module is there and loadable, and why not. */
void mw_device_version(char *buf, size_t len);

#endif
