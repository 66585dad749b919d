/* CUDA twins of mixed precision's casts (kernels/cast.h): float32 rounded in place to
 * bfloat16 or float16 values (kernels/cuda/cast.cuh, bit for bit the reference's), grid-stride
 * loops. */
#include "kernels/cuda/cast.cuh"
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

static __global__ void round_bf16_kernel(float *p, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        p[i] = mw_cuda_bf16_round(p[i]);
    }
}

extern "C" void mw_round_bf16_cuda(const mw_kctx *k, float *p, size_t count)
{
    MW_EW_LAUNCH("mw_round_bf16_cuda", round_bf16_kernel, count, p, count);
}

static __global__ void round_f16_kernel(float *p, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        p[i] = mw_cuda_f16_round(p[i]);
    }
}

extern "C" void mw_round_f16_cuda(const mw_kctx *k, float *p, size_t count)
{
    MW_EW_LAUNCH("mw_round_f16_cuda", round_f16_kernel, count, p, count);
}
