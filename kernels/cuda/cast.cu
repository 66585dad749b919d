/* CUDA twins of mixed precision's casts (kernels/cast.h): float32 rounded in place to
 * bfloat16 or float16 values, grid-stride loops. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

/* kernels/cast.h's rounding, bit for bit (the reference's integer steps). */
static __global__ void round_bf16_kernel(float *p, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        unsigned u = __float_as_uint(p[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            u = (u | 0x00400000u) & 0xffff0000u;
        else
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        p[i] = __uint_as_float(u);
    }
}

extern "C" void mw_round_bf16_cuda(const mw_kctx *k, float *p, size_t count)
{
    MW_EW_LAUNCH("mw_round_bf16_cuda", round_bf16_kernel, count, p, count);
}

/* kernels/cast.h's float16 rounding, bit for bit (not __float2half_rn, whose NaNs lose their
 * payload); the subnormal step's two adds rounded to nearest whatever the flags. */
static __global__ void round_f16_kernel(float *p, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const unsigned u = __float_as_uint(p[i]), a = u & 0x7fffffffu;
        unsigned r;
        if (a > 0x7f800000u)
            r = (u | 0x00400000u) & 0xffffe000u;
        else if (a < 0x38800000u)
            r = (u & 0x80000000u) |
                __float_as_uint(__fsub_rn(__fadd_rn(__uint_as_float(a), 0.5f), 0.5f));
        else {
            r = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
            r = (u & 0x80000000u) | (r > 0x477fe000u ? 0x7f800000u : r);
        }
        p[i] = __uint_as_float(r);
    }
}

extern "C" void mw_round_f16_cuda(const mw_kctx *k, float *p, size_t count)
{
    MW_EW_LAUNCH("mw_round_f16_cuda", round_f16_kernel, count, p, count);
}
