/* Fast CPU ReLU (parallel, vectorizable). Cross-entropy is tiny (N x classes)
 * and uses the reference. */
#include "kernels/activation.h"
#include "kernels/cpu/cpu.h"

void mw_relu_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mw_relu_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++) {
        float d = dy[i]; /* unconditional load: keeps the loop branch-free */
        dx[i] = y[i] > 0.0f ? d : 0.0f;
    }
}
