/* The one matrix product of the fast CPU path, and its thread setting.
 * Both libraries are linked when oneDNN is present; MW_GEMM=openblas selects
 * OpenBLAS at run time, so benchmarks can compare them in one binary. */
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdint.h>
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

static unsigned long bf16_count; /* atomic */

unsigned long mw_gemm_cpu_bf16_count(void)
{
    return __atomic_load_n(&bf16_count, __ATOMIC_RELAXED);
}

#ifdef MW_HAVE_DNNL
/* bfloat16 products: one matmul primitive per (M, N, K, ldc, beta) kept for the process's
 * life (a training step repeats a few dozen shapes), made under a lock and executed by any
 * thread (oneDNN's primitives are thread-safe; streams are made per call). */
enum { MAX_PLANS = 128 };
typedef struct {
    int M, N, K, ldc, sum, ta, tb;
    dnnl_primitive_t p;
    size_t scratch; /* bytes of its scratchpad, which each call brings */
} bf16_plan;
static bf16_plan plans[MAX_PLANS];
static int nplans;
static dnnl_engine_t engine;
static pthread_mutex_t plans_mu = PTHREAD_MUTEX_INITIALIZER;

/* (rows, cols) with row stride ld, or (trans) its transpose's layout: element (r, c) at
 * c * ld + r. */
static int md2(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t dt, int ld, int trans)
{
    dnnl_dims_t d = {rows, cols}, st = {ld, 1}, stt = {1, ld};
    return dnnl_memory_desc_init_by_strides(md, 2, d, dt, trans ? stt : st) == dnnl_success;
}

/* The bfloat16 operands: op(A) (M,K) and op(B) (K,N) kept in their stored layout (oneDNN's
 * matmul reads transposed operands through strides), each densely packed. */
static int operand_mds(dnnl_memory_desc_t *a, dnnl_memory_desc_t *b, int M, int N, int K, int ta,
                       int tb)
{
    return md2(a, M, K, dnnl_bf16, ta ? M : K, ta) && md2(b, K, N, dnnl_bf16, tb ? K : N, tb);
}

/* The primitive for C (M,N; ldc) [+]= op(A16) (M,K) op(B16) (K,N); NULL when oneDNN has
 * none. Its scratchpad is the caller's (user mode): threads running one primitive at once
 * must not share the library's. */
static dnnl_primitive_t make_plan(int M, int N, int K, int ldc, int sum, int ta, int tb,
                                  size_t *scratch)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        return NULL;
    if (!operand_mds(&a, &b, M, N, K, ta, tb) || !md2(&c, M, N, dnnl_f32, ldc, 0) ||
        dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return NULL;
    int ok =
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && sum)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    if (ok && dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL) == dnnl_success) {
        const dnnl_memory_desc_t *sd =
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        *scratch = sd ? dnnl_memory_desc_get_size(sd) : 0;
        (void)dnnl_primitive_create(&p, pd);
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return p;
}

static dnnl_primitive_t find_plan(int M, int N, int K, int ldc, int sum, int ta, int tb, int *owned,
                                  size_t *scratch)
{
    dnnl_primitive_t p = NULL;
    *owned = 0;
    *scratch = 0;
    pthread_mutex_lock(&plans_mu);
    for (int i = 0; i < nplans && !p; i++)
        if (plans[i].M == M && plans[i].N == N && plans[i].K == K && plans[i].ldc == ldc &&
            plans[i].sum == sum && plans[i].ta == ta && plans[i].tb == tb)
            p = plans[i].p, *scratch = plans[i].scratch;
    if (!p && (p = make_plan(M, N, K, ldc, sum, ta, tb, scratch)) != NULL) {
        if (nplans < MAX_PLANS)
            plans[nplans++] = (bf16_plan){M, N, K, ldc, sum, ta, tb, p, *scratch};
        else
            *owned = 1; /* a model of unusually many shapes: made per call */
    }
    pthread_mutex_unlock(&plans_mu);
    return p;
}

/* The top halves of n floats (bfloat16 values: exact), a loop the compiler vectorizes. */
static void halves(uint16_t *restrict dst, const float *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, src + i, sizeof u);
        dst[i] = (uint16_t)(u >> 16);
    }
}

/* dst (rows, cols) densely packed = the top halves of src (rows, cols; row stride ld). */
static void pack(uint16_t *restrict dst, const float *restrict src, int rows, int cols, int ld)
{
    if (ld == cols)
        halves(dst, src, (size_t)rows * cols);
    else
        for (int r = 0; r < rows; r++)
            halves(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}

static int gemm_bf16(char ta, char tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    int owned;
    size_t scratch;
    const int ta_ = ta == 'T', tb_ = tb == 'T';
    dnnl_primitive_t p = find_plan(M, N, K, ldc, beta != 0.0f, ta_, tb_, &owned, &scratch);
    if (!p)
        return 0;
    const size_t halves = (size_t)M * K + (size_t)K * N;
    uint16_t *a16 = malloc(halves * sizeof *a16 + 64 + scratch);
    dnnl_stream_t st = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    dnnl_memory_desc_t a, b, c, sp;
    dnnl_dims_t sdim = {(dnnl_dim_t)(scratch > 0 ? scratch : 1)};
    int ok = a16 && operand_mds(&a, &b, M, N, K, ta_, tb_) && md2(&c, M, N, dnnl_f32, ldc, 0) &&
             dnnl_memory_desc_init_by_tag(&sp, 1, sdim, dnnl_u8, dnnl_a) == dnnl_success;
    if (ok) {
        uint16_t *b16 = a16 + (size_t)M * K;
        pack(a16, A, ta_ ? K : M, ta_ ? M : K, lda); /* as stored */
        pack(b16, B, tb_ ? N : K, tb_ ? K : N, ldb);
        ok = dnnl_stream_create(&st, engine, dnnl_stream_default_flags) == dnnl_success &&
             dnnl_memory_create(&ma, &a, engine, a16) == dnnl_success &&
             dnnl_memory_create(&mb, &b, engine, b16) == dnnl_success &&
             dnnl_memory_create(&mc, &c, engine, C) == dnnl_success;
        /* the scratchpad after the halves, 64-byte aligned */
        uintptr_t sp_at = ((uintptr_t)(a16 + halves) + 63) & ~(uintptr_t)63;
        ok = ok && dnnl_memory_create(&ms, &sp, engine, (void *)sp_at) == dnnl_success;
    }
    if (ok) {
        const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma},
                                         {DNNL_ARG_WEIGHTS, mb},
                                         {DNNL_ARG_DST, mc},
                                         {DNNL_ARG_SCRATCHPAD, ms}};
        ok = dnnl_primitive_execute(p, st, 4, args) == dnnl_success &&
             dnnl_stream_wait(st) == dnnl_success;
    }
    if (ms)
        dnnl_memory_destroy(ms);
    if (mc)
        dnnl_memory_destroy(mc);
    if (mb)
        dnnl_memory_destroy(mb);
    if (ma)
        dnnl_memory_destroy(ma);
    if (st)
        dnnl_stream_destroy(st);
    if (owned)
        dnnl_primitive_destroy(p);
    free(a16);
    return ok;
}
#endif

void mw_gemm_cpu(const mw_kctx *k, char ta, char tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
#ifdef MW_HAVE_DNNL
    /* K == 0 (an empty slice's dW) and a failed plan go to sgemm, whose result is the same */
    if (k && k->bf16 && K > 0 && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
        mw_kernels_cpu_has_bf16() && gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)) {
        __atomic_add_fetch(&bf16_count, 1, __ATOMIC_RELAXED);
        return;
    }
#else
    (void)k;
#endif
    mw_sgemm_cpu(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
