/* Deterministic column sums of rows x D terms on the device, for the normalizations' parameter
 * gradients (layernorm.cu, rmsnorm.cu): out[c] += the sum over the rows r of term(r, c).
 *
 * Two stages in a fixed order. Stage 1, a grid of ceil(D / CS_TX) x chunks blocks of CS_TX x
 * CS_TY threads: thread (tx, ty) of block (bx, by) owns feature c = bx CS_TX + tx and sums the
 * rows r0 + ty, r0 + ty + CS_TY, ... of chunk by (a warp reads CS_TX consecutive floats of a row),
 * then thread ty = 0 adds the CS_TY sums in ascending ty and writes the chunk's partial into the
 * context's scratch. Stage 2, one thread per feature, adds the partials into out[c] in ascending
 * chunk order. The number of chunks depends only on rows and D, so the sums are the same bits on
 * every run and device. The order differs from the reference's one-row-after-another float32 sum:
 * both are within (rows + 1) 2^-24 of the sum of |term| of the exact sum (the bound of any order
 * of float32 additions), which is the tolerance test_cuda_det argues. */
#ifndef MW_KERNELS_CUDA_COLSUM_CUH
#define MW_KERNELS_CUDA_COLSUM_CUH

#include "kernels/cuda/runtime.cuh"

#define CS_TX 32          /* features per stage-1 block */
#define CS_TY 8           /* rows a stage-1 block reads at once */
#define CS_CHUNK_ROWS 64  /* rows per chunk, unless that gives too many chunks */
#define CS_MAX_CHUNKS 256 /* grid.y of stage 1; stage 2 adds at most this many partials */

/* Chunks for rows x D with S sums per element: one per CS_CHUNK_ROWS rows, at most
 * CS_MAX_CHUNKS, at most as many as fit S chunks D floats in MW_CUDA_WS_DEFAULT; at least 1. */
static inline int cs_chunks(int rows, int D, int S)
{
    const size_t slots = MW_CUDA_WS_DEFAULT / ((size_t)S * (size_t)D);
    size_t n = ((size_t)rows + CS_CHUNK_ROWS - 1) / CS_CHUNK_ROWS;
    n = n < slots ? n : slots;
    n = n < CS_MAX_CHUNKS ? n : CS_MAX_CHUNKS;
    return n > 0 ? (int)n : 1;
}

/* Stage 1: part[q][chunk][c] = chunk's sum q < S of term(r, c) (f(r, c, a, b) adds the terms
 * of element (r, c) to a and b). */
template <int S, class F>
static __global__ void cs_part_kernel(float *part, const F f, int rows, int D, int chunk_rows,
                                      int chunks)
{
    __shared__ float sh[S][CS_TY][CS_TX];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * CS_TX + tx;
    const int r0 = blockIdx.y * chunk_rows;
    const int r1 = rows - r0 < chunk_rows ? rows : r0 + chunk_rows;
    float acc[2] = {0.0f, 0.0f};
    for (int r = r0 + ty; c < D && r < r1; r += CS_TY)
        f(r, c, acc[0], acc[1]);
    for (int q = 0; q < S; q++)
        sh[q][ty][tx] = acc[q];
    __syncthreads();
    if (ty != 0 || c >= D)
        return;
    for (int q = 0; q < S; q++) {
        float s = sh[q][0][tx];
        for (int t = 1; t < CS_TY; t++)
            s += sh[q][t][tx];
        part[((size_t)q * chunks + blockIdx.y) * D + c] = s;
    }
}

/* Stage 2: out_q[c] += the partials of sum q in ascending chunk order (out_q NULL: skipped). */
static __global__ void cs_final_kernel(float *out0, float *out1, const float *part, int D,
                                       int chunks)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < D; c += gridDim.x * blockDim.x)
        for (int q = 0; q < 2; q++) {
            float *o = q == 0 ? out0 : out1;
            if (!o)
                continue;
            float g = o[c];
            for (int ch = 0; ch < chunks; ch++)
                g += part[((size_t)q * chunks + ch) * D + c];
            o[c] = g;
        }
}

/* Enqueue out0[c] += the column sums of term 0 and (S == 2) out1[c] += those of term 1, for
 * rows > 0 and D > 0; false, with the failure recorded on d (a workspace too small for S chunks
 * D floats names it), when it could not. */
template <int S, class F>
static bool cs_sums(mw_cuda_dev *d, const mw_kctx *k, const char *op, const F &f, int rows, int D,
                    float *out0, float *out1)
{
    const int chunks = cs_chunks(rows, D, S), chunk_rows = (rows + chunks - 1) / chunks;
    const size_t need = (size_t)S * chunks * D, have = k->ws ? k->ws_count : 0;
    if (have < need)
        return mw_cuda_note(d, mw_err(MW_EINVAL,
                                      "%s: device workspace %zu floats, %d rows of %d features "
                                      "need %zu (mw_cuda_ws_reserve)",
                                      op, have, rows, D, need));
    const dim3 grid((unsigned)((D + CS_TX - 1) / CS_TX), (unsigned)chunks);
    cs_part_kernel<S, F>
        <<<grid, dim3(CS_TX, CS_TY), 0, d->stream>>>(k->ws, f, rows, D, chunk_rows, chunks);
    if (!mw_cuda_note(d, mw_cuda_launched_("cs_part_kernel", __FILE__, __LINE__)))
        return false;
    cs_final_kernel<<<mw_cuda_grid((size_t)D), MW_CUDA_BLOCK, 0, d->stream>>>(
        out0, S == 2 ? out1 : NULL, k->ws, D, chunks);
    return mw_cuda_note(d, mw_cuda_launched_("cs_final_kernel", __FILE__, __LINE__));
}

/* Row kernels: one warp per row, CS_ROW_WARPS rows per block of 32 CS_ROW_WARPS threads. */
#define CS_ROW_WARPS 8

/* The grid for rows rows, a warp each. */
static inline unsigned cs_row_grid(int rows)
{
    const size_t b = ((size_t)rows + CS_ROW_WARPS - 1) / CS_ROW_WARPS;
    return (unsigned)(b < 65535 ? b : 65535);
}

#endif
