/* The GPU backend as a loadable module (worker/replicas/replicas_gpu.c, built into
 * mwtrain-cuda.so with the CUDA kernels): its one exported symbol, which device.c looks up by
 * name (MW_GPU_MODULE_ENTRY) and checks against MW_GPU_MODULE_ABI. */
#ifndef MW_WORKER_REPLICAS_REPLICAS_GPU_H
#define MW_WORKER_REPLICAS_REPLICAS_GPU_H

#include "worker/replicas/device.h"

/* The module's table: its ABI, its device probe and version, and the GPU replicas' ops. */
const mw_gpu_module *mw_gpu_module_get(void);

#endif
