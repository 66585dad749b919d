/* Embedding's CUDA twins (kernels/embed.h): the gather one thread per output value; the
 * scatter-add deterministic, in the reference's order. A row that repeats in a batch sums its
 * positions' gradients one after another, in ascending position, exactly as the reference's loop
 * does, so the device's table gradient is the reference's bit for bit on every run (no atomics):
 *   1. keys: each position's row (V for an id outside [0, V): sorted last, never summed) and
 *      its position as the value;
 *   2. CUB's radix sort of the (row, position) pairs, which is stable: each row's positions stay
 *      in ascending order;
 *   3. one thread per (sorted slot, feature): the first slot of each row's run adds the run's
 *      gradients into the row's entry in order (a warp reads consecutive features of a row).
 * The pairs (twice: the sort's double buffer) and the sort's own room live in the context's
 * scratch: mw_cuda_embed_ws says how much, and the GPU backend reserves it before training. */
#include <limits.h>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/runtime.cuh"

#define MW_SINE_HD __device__ static inline
extern "C" {
#include "kernels/embed.h"
#include "kernels/twins.h"
}

static __device__ long embed_row(float id, int V)
{
    return id >= 0.0f && id < (float)V && id == (float)(long)id ? (long)id : -1;
}

static __global__ void embed_fwd_kernel(float *y, const float *ids, const float *table,
                                        size_t count, int D, int V)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const long r = embed_row(ids[i / D], V);
        y[i] = r >= 0 ? table[(size_t)r * D + i % D] : 0.0f;
    }
}

extern "C" void mw_embed_fwd_cuda(const mw_kctx *k, float *y, const float *ids, const float *table,
                                  int n, int T, int D, int V)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_embed_fwd_cuda");
    const size_t count = (size_t)n * T * D;
    if (!d || count == 0)
        return;
    embed_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, ids, table, count, D,
                                                                           V);
    MW_LAUNCHED_K(d, "embed_fwd_kernel");
    mw_cuda_end(d, "mw_embed_fwd_cuda");
}

/* Step 1: key[p] = position p's row (V for none), val[p] = p. */
static __global__ void embed_keys_kernel(unsigned *key, unsigned *val, const float *ids, size_t np,
                                         int V)
{
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < np;
         p += (size_t)gridDim.x * blockDim.x) {
        const long r = embed_row(ids[p], V);
        key[p] = r >= 0 ? (unsigned)r : (unsigned)V;
        val[p] = (unsigned)p;
    }
}

#define EMBED_BATCH 16 /* a run's positions loaded at once */

/* Step 3: thread (s, j) of the sorted slots: where slot s starts the run of row r < V,
 * gtable[r, j] += the run's dy[., j] one after another (ascending positions: the reference's
 * order). */
static __global__ void embed_sum_kernel(float *gtable, const float *dy, const unsigned *key,
                                        const unsigned *val, size_t np, int D, unsigned V)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < np * D;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t s = i / D, j = i % D;
        const unsigned r = key[s];
        if (r >= V || (s > 0 && key[s - 1] == r))
            continue;
        float g = gtable[(size_t)r * D + j], t[EMBED_BATCH];
        size_t u = s;
        /* EMBED_BATCH loads in flight at once, then their adds in order: a long run (a padding
         * id) waits for memory once per batch, not once per position. The keys are sorted, so
         * key[u + B - 1] == r says the whole batch is row r's. */
        for (; u + EMBED_BATCH <= np && key[u + EMBED_BATCH - 1] == r; u += EMBED_BATCH) {
#pragma unroll
            for (int q = 0; q < EMBED_BATCH; q++)
                t[q] = dy[(size_t)val[u + q] * D + j];
#pragma unroll
            for (int q = 0; q < EMBED_BATCH; q++)
                g += t[q];
        }
        for (; u < np && key[u] == r; u++)
            g += dy[(size_t)val[u] * D + j];
        gtable[(size_t)r * D + j] = g;
    }
}

/* The scratch of one backward, in floats: keys, then values, each twice (the sort's double
 * buffer, stride floats apart), then the sort's own room (temp bytes). */
struct embed_plan {
    size_t stride, temp, floats;
    int end_bit; /* the keys' bits: rows 0 .. V */
};

/* The plan for np positions and V rows (np <= INT_MAX), from CUB's own size query (no work
 * enqueued). */
static cudaError_t embed_plan_of(size_t np, int V, embed_plan *p)
{
    p->stride = (np + 63) / 64 * 64;
    p->end_bit = 1;
    while (p->end_bit < 32 && ((unsigned)V >> p->end_bit) != 0)
        p->end_bit++;
    cub::DoubleBuffer<unsigned> keys(NULL, NULL), vals(NULL, NULL);
    p->temp = 0;
    const cudaError_t e =
        cub::DeviceRadixSort::SortPairs(NULL, p->temp, keys, vals, (int)np, 0, p->end_bit);
    p->floats = 4 * p->stride + (p->temp + sizeof(float) - 1) / sizeof(float);
    return e;
}

extern "C" size_t mw_cuda_embed_ws(size_t positions, int V)
{
    embed_plan p;
    if (positions == 0 || positions > INT_MAX || embed_plan_of(positions, V, &p) != cudaSuccess)
        return 0;
    return p.floats;
}

extern "C" void mw_embed_bwd_cuda(const mw_kctx *k, float *gtable, const float *dy,
                                  const float *ids, int n, int T, int D, int V)
{
    const char *op = "mw_embed_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    const size_t np = (size_t)n * T, count = np * D;
    if (!d || count == 0)
        return;
    if (np > INT_MAX) {
        mw_cuda_note(
            d, mw_err(MW_EINVAL, "%s: %zu positions, the sort takes at most %d", op, np, INT_MAX));
        return;
    }
    embed_plan pl;
    MW_CUDA_K(d, embed_plan_of(np, V, &pl));
    const size_t have = k->ws ? k->ws_count : 0;
    if (have < pl.floats) {
        mw_cuda_note(d, mw_err(MW_EINVAL,
                               "%s: device workspace %zu floats, %zu positions of %d rows need %zu "
                               "(mw_cuda_embed_ws, mw_cuda_ws_reserve)",
                               op, have, np, V, pl.floats));
        return;
    }
    unsigned *key = (unsigned *)k->ws, *val = key + 2 * pl.stride;
    embed_keys_kernel<<<mw_cuda_grid(np), MW_CUDA_BLOCK, 0, d->stream>>>(key, val, ids, np, V);
    MW_LAUNCHED_K(d, "embed_keys_kernel");
    cub::DoubleBuffer<unsigned> kb(key, key + pl.stride), vb(val, val + pl.stride);
    size_t temp = pl.temp;
    MW_CUDA_K(d, cub::DeviceRadixSort::SortPairs(k->ws + 4 * pl.stride, temp, kb, vb, (int)np, 0,
                                                 pl.end_bit, d->stream));
    embed_sum_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(
        gtable, dy, kb.Current(), vb.Current(), np, D, (unsigned)V);
    MW_LAUNCHED_K(d, "embed_sum_kernel");
    mw_cuda_end(d, op);
}

/* One thread per (example, feature): the steps in order, as the reference. */
static __global__ void masked_mean_fwd_kernel(float *y, const float *x, const float *ids, int n,
                                              int T, int D)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * D;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t e = i / D, j = i % D;
        const float *id = ids + e * T, *xe = x + e * T * D;
        float s = 0.0f, c = 0.0f;
        for (int t = 0; t < T; t++)
            if (id[t] != 0.0f)
                s += xe[(size_t)t * D + j], c += 1.0f;
        y[i] = s / c;
    }
}

static __global__ void masked_mean_bwd_kernel(float *dx, const float *dy, const float *ids, int n,
                                              int T, int D)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * T * D;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t e = i / ((size_t)T * D), t = i / D % T, j = i % D;
        const float *id = ids + e * T;
        if (id[t] == 0.0f)
            continue;
        float c = 0.0f;
        for (int u = 0; u < T; u++)
            c += id[u] != 0.0f;
        dx[i] += dy[e * D + j] / c;
    }
}

extern "C" void mw_masked_mean_fwd_cuda(const mw_kctx *k, float *y, const float *x,
                                        const float *ids, int n, int T, int D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_masked_mean_fwd_cuda");
    const size_t count = (size_t)n * D;
    if (!d || count == 0)
        return;
    masked_mean_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, x, ids, n, T,
                                                                                 D);
    MW_LAUNCHED_K(d, "masked_mean_fwd_kernel");
    mw_cuda_end(d, "mw_masked_mean_fwd_cuda");
}

extern "C" void mw_masked_mean_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                        const float *ids, int n, int T, int D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_masked_mean_bwd_cuda");
    const size_t count = (size_t)n * T * D;
    if (!d || count == 0)
        return;
    masked_mean_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dx, dy, ids, n, T,
                                                                                 D);
    MW_LAUNCHED_K(d, "masked_mean_bwd_kernel");
    mw_cuda_end(d, "mw_masked_mean_bwd_cuda");
}

static __global__ void sine_pos_kernel(float *y, size_t count, int T, int D, float max_wavelength)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e % ((size_t)T * D);
        y[e] = mw_sine_pos_value((int)(r / D), (int)(r % D), D, max_wavelength);
    }
}

extern "C" void mw_sine_pos_cuda(const mw_kctx *k, float *y, int n, int T, int D,
                                 float max_wavelength)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_sine_pos_cuda");
    const size_t count = (size_t)(n > 0 ? n : 0) * T * D;
    if (!d || count == 0)
        return;
    sine_pos_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, count, T, D,
                                                                          max_wavelength);
    MW_LAUNCHED_K(d, "sine_pos_kernel");
    mw_cuda_end(d, "mw_sine_pos_cuda");
}
