/* The CUDA backend table: every entry of kernels/kernel_list.h becomes its CUDA twin, but only
 * when a device is usable, so a host without one keeps its reference/CPU table. */
#include "kernels/cuda/runtime.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/table.h"

extern "C" {
#include "kernels/twins.h"
}

/* Failures are recorded in the context's sticky status (see runtime.h). */
extern "C" void mw_zero_cuda(const mw_kctx *k, void *p, size_t nbytes)
{
    (void)mw_cuda_zero(p, nbytes, k);
}

extern "C" void mw_kernels_init_cuda(mw_kernels *t)
{
    if (mw_cuda_device_count() <= 0)
        return;
    t->name = "cuda";
#define MW_KERNEL(op, fast, params, args, arrays) t->op = mw_##op##_cuda;
#include "kernels/kernel_list.h"
#undef MW_KERNEL
}
