/* MultiHeadAttention's core, the CUDA twin (kernels/kernel_list.h: attn_fwd, attn_bwd): one thread
 * per row (example, head, query position) or per column (example, key head, key position: a
 * grouped-query key head's sums over its group), each by the reference's
 * rules (kernels/attention_rules.h), so every sum is the reference's, in its order, with no
 * atomics. The backward runs dv (reads p), then ds (writes over p), then dq and dk, as four
 * launches on the stream. The geometry goes by value; its mask and id pointers are device memory.
 */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#define MW_ATT_HD __device__ static inline
#define MW_ATT_HASH mw_cuda_rng_hash
#include "kernels/attention_rules.h"

/* row r of n H T (or n kv_heads S: HS att_kvh(&g)): its example, head and position */
#define MW_ATT_SPLIT_HS(r, P, HS)                                                                  \
    const int pos = (int)((r) % (P)), h = (int)((r) / (P) % (HS)), i = (int)((r) / (P) / (HS))
#define MW_ATT_SPLIT(r, P) MW_ATT_SPLIT_HS(r, P, g.H)

static __global__ void attn_fwd_kernel(float *o, float *p, const float *q, const float *kk,
                                       const float *v, mw_attn_geom g, size_t rows)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        MW_ATT_SPLIT(r, g.T);
        att_row_fwd(o, p, q, kk, v, &g, i, h, pos);
    }
}

static __global__ void attn_dv_kernel(float *dv, const float *p, const float *dout, mw_attn_geom g,
                                      size_t cols)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < cols;
         r += (size_t)gridDim.x * blockDim.x) {
        MW_ATT_SPLIT_HS(r, g.S, att_kvh(&g));
        att_col_dv(dv, p, dout, &g, i, h, pos);
    }
}

static __global__ void attn_ds_kernel(float *p, const float *dout, const float *q, const float *kk,
                                      const float *v, mw_attn_geom g, size_t rows)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        MW_ATT_SPLIT(r, g.T);
        att_row_ds(p, dout, q, kk, v, &g, i, h, pos);
    }
}

static __global__ void attn_dq_kernel(float *dq, const float *ds, const float *kk, mw_attn_geom g,
                                      size_t rows)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        MW_ATT_SPLIT(r, g.T);
        att_row_dq(dq, ds, kk, &g, i, h, pos);
    }
}

static __global__ void attn_dk_kernel(float *dk, const float *ds, const float *q, mw_attn_geom g,
                                      size_t cols)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < cols;
         r += (size_t)gridDim.x * blockDim.x) {
        MW_ATT_SPLIT_HS(r, g.S, att_kvh(&g));
        att_col_dk(dk, ds, q, &g, i, h, pos);
    }
}

extern "C" void mw_attn_fwd_cuda(const mw_kctx *k, float *o, float *p, const float *q,
                                 const float *kk, const float *v, const mw_attn_geom *g, int n)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_attn_fwd_cuda");
    if (!d || n <= 0)
        return;
    const size_t rows = (size_t)n * g->H * g->T;
    attn_fwd_kernel<<<mw_cuda_grid(rows), MW_CUDA_BLOCK, 0, d->stream>>>(o, p, q, kk, v, *g, rows);
    MW_LAUNCHED_K(d, "attn_fwd_kernel");
    mw_cuda_end(d, "mw_attn_fwd_cuda");
}

extern "C" void mw_attn_bwd_cuda(const mw_kctx *k, float *dq, float *dk, float *dv, float *p,
                                 const float *dout, const float *q, const float *kk, const float *v,
                                 const mw_attn_geom *g, int n)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_attn_bwd_cuda");
    if (!d || n <= 0)
        return;
    const size_t rows = (size_t)n * g->H * g->T, cols = (size_t)n * mw_attn_kvh(g) * g->S;
    attn_dv_kernel<<<mw_cuda_grid(cols), MW_CUDA_BLOCK, 0, d->stream>>>(dv, p, dout, *g, cols);
    MW_LAUNCHED_K(d, "attn_dv_kernel");
    attn_ds_kernel<<<mw_cuda_grid(rows), MW_CUDA_BLOCK, 0, d->stream>>>(p, dout, q, kk, v, *g,
                                                                        rows);
    MW_LAUNCHED_K(d, "attn_ds_kernel");
    attn_dq_kernel<<<mw_cuda_grid(rows), MW_CUDA_BLOCK, 0, d->stream>>>(dq, p, kk, *g, rows);
    MW_LAUNCHED_K(d, "attn_dq_kernel");
    attn_dk_kernel<<<mw_cuda_grid(cols), MW_CUDA_BLOCK, 0, d->stream>>>(dk, p, q, *g, cols);
    MW_LAUNCHED_K(d, "attn_dk_kernel");
    mw_cuda_end(d, "mw_attn_bwd_cuda");
}
