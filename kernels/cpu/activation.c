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

/* The cross-entropy's rows are independent: the reference on chunks of rows, one per thread,
 * computes every row exactly as the reference does (bitwise equal). */
void mw_xent_fwd_cpu(const mw_kctx *k, float *loss, float *prob, const float *logits,
                     const int32_t *labels, int N, int K)
{
    const int nt = MW_NT(k), per = (N + nt - 1) / (nt > 0 ? nt : 1);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < nt; c++) {
        const int r0 = c * per, m = N - r0 < per ? N - r0 : per;
        if (m > 0)
            mw_xent_fwd_ref(k, loss + r0, prob + (size_t)r0 * K, logits + (size_t)r0 * K,
                            labels + r0, m, K);
    }
}

void mw_xent_bwd_cpu(const mw_kctx *k, float *dlogits, const float *prob, const int32_t *labels,
                     float scale, int N, int K)
{
    const int nt = MW_NT(k), per = (N + nt - 1) / (nt > 0 ? nt : 1);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < nt; c++) {
        const int r0 = c * per, m = N - r0 < per ? N - r0 : per;
        if (m > 0)
            mw_xent_bwd_ref(k, dlogits + (size_t)r0 * K, prob + (size_t)r0 * K, labels + r0, scale,
                            m, K);
    }
}
