/* The one matrix product of the fast CPU path, and its thread setting.
 * Both libraries are linked when oneDNN is present; MW_GEMM=openblas selects
 * OpenBLAS at run time, so benchmarks can compare them in one binary. */
#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef MW_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

static int selected = -1; /* 1: oneDNN, 0: OpenBLAS, -1: not read yet */

void mw_sgemm_select_from_env(void)
{
#ifdef MW_HAVE_DNNL
    const char *v = getenv("MW_GEMM");
    selected = !(v && strcmp(v, "openblas") == 0);
#else
    selected = 0;
#endif
}

static int use_dnnl(void)
{
    if (selected < 0)
        mw_sgemm_select_from_env();
    return selected;
}

const char *mw_kernels_cpu_blas(void)
{
    return use_dnnl() ? "oneDNN" : "OpenBLAS";
}

const char *mw_kernels_cpu_isa(void)
{
#ifdef MW_HAVE_DNNL
    if (!use_dnnl())
        return "";
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return "other";
    }
#else
    return "";
#endif
}

int mw_kernels_cpu_has_bf16(void)
{
#ifdef MW_HAVE_DNNL
    if (!use_dnnl())
        return 0;
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
#else
    return 0;
#endif
}

void mw_kernels_cpu_set_threads(int n)
{
    if (n < 1)
        n = 1;
    /* Training parallelizes over the batch (one sgemm per thread), so
     * OpenBLAS' own pthreads would only oversubscribe the cores. oneDNN uses
     * OpenMP and runs sequentially inside our parallel regions by itself. */
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

void mw_sgemm_cpu(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
#ifdef MW_HAVE_DNNL
    if (use_dnnl()) {
        /* K == 0 is legal for dnnl_sgemm and scales C by beta. */
        dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
                tb == 'T' ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}
