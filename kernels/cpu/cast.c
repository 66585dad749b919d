/* The fast CPU cast: the reference's rounding over k's threads, vectorized by the compiler
 * (integer adds and masks); bitwise equal to the reference. */
#include "kernels/cast.h"
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

void mw_round_bf16_cpu(const mw_kctx *k, float *p, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        p[i] = mw_bf16_round(p[i]);
}

void mw_round_f16_cpu(const mw_kctx *k, float *p, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        p[i] = mw_f16_round(p[i]);
}
