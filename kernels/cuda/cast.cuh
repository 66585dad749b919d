/* kernels/cast.h's roundings on the device, bit for bit: float32 to the bfloat16 or float16
 * value nearest (ties to even; a NaN keeps its sign and top payload bits, made quiet; float16
 * past 65504 is infinity, under 2^-14 a multiple of 2^-24). The integer steps are the
 * reference's; float16's subnormal step adds and subtracts 0.5 rounded to nearest whatever the
 * compiler's flags. Used by kernels/cuda/cast.cu and the attention's probabilities. */
#ifndef MW_KERNELS_CUDA_CAST_CUH
#define MW_KERNELS_CUDA_CAST_CUH

__device__ static inline float mw_cuda_bf16_round(float x)
{
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = (u | 0x00400000u) & 0xffff0000u;
    else
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return __uint_as_float(u);
}

__device__ static inline float mw_cuda_f16_round(float x)
{
    const unsigned u = __float_as_uint(x), a = u & 0x7fffffffu;
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
    return __uint_as_float(r);
}

#endif
