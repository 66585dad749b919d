/* Internal to kernels/cuda: the inline helpers the kernels share (launch grid, operand
 * precision, the device's counter hash, an NHWC element's coordinates). Included only by the
 * .cu files (CUDA types are fine here, never in the plain C headers such as runtime.h). The
 * functions are declared by their files' own .cuh: runtime.cuh (the state behind mw_kctx.dev,
 * checks, begin/end of a kernel), gemm.cuh (row-major GEMM, column sums, bias), cudnn.cuh (the
 * cuDNN convolutions). */
#ifndef MW_KERNELS_CUDA_DEV_CUH
#define MW_KERNELS_CUDA_DEV_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "common/status.h"
#include "kernels/kernels.h"
}

/* Threads per block for element-wise kernels, and the grid for count items
 * with grid-stride loops (capped; count > 0). */
#define MW_CUDA_BLOCK 256
static inline unsigned mw_cuda_grid(size_t count)
{
    size_t g = (count + MW_CUDA_BLOCK - 1) / MW_CUDA_BLOCK;
    return (unsigned)(g < 65536 ? g : 65536);
}

/* A warp's sum of v, the same bits in every lane and on every run (an xor butterfly: each pair
 * of lanes adds the same two operands). All 32 lanes must call it. */
__device__ static inline double mw_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* A normalization row's input gradient v at feature j: added into dx, or (dx NULL: the norm
 * fused with the residual Add of its input) added to the sum's other gradient ds[j] and that
 * into each Add input's gradient (da, db; NULL: the model's input). */
__device__ static inline void mw_norm_dx(float *dx, const float *ds, float *da, float *db, int j,
                                         float v)
{
    if (dx) {
        dx[j] += v;
        return;
    }
    const float t = ds[j] + v;
    if (da)
        da[j] += t;
    if (db)
        db[j] += t;
}

/* What a layer's matrix operands hold (mw_cuda_half of its context): float32, or bfloat16 or
 * float16 values (mixed precision, kernels/cast.h). */
enum { MW_HALF_NONE = 0, MW_HALF_BF16 = 1, MW_HALF_F16 = 2 };
static inline int mw_cuda_half(const mw_kctx *k)
{
    return k->bf16 ? MW_HALF_BF16 : k->f16 ? MW_HALF_F16 : MW_HALF_NONE;
}

/* == common/rng.c's mw_rng_hash(seed, stream, counter), on the device: a dropout mask keyed by
 * global example id must equal the host's bit for bit. */
__device__ static inline uint64_t mw_cuda_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
__device__ static inline uint64_t mw_cuda_rng_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return mw_cuda_splitmix64(mw_cuda_splitmix64(mw_cuda_splitmix64(seed) ^ stream) ^ counter);
}

/* Element e of an NHWC array of H x W x C images: its image n, row h, column w and channel c
 * (e = ((n*H + h)*W + w)*C + c), the coordinates a one-thread-per-element kernel works from. */
struct mw_nhwc {
    size_t n;
    int h, w, c;
};
__host__ __device__ static inline mw_nhwc mw_cuda_nhwc(size_t e, int H, int W, int C)
{
    mw_nhwc at;
    at.c = (int)(e % (size_t)C);
    e /= (size_t)C;
    at.w = (int)(e % (size_t)W);
    e /= (size_t)W;
    at.h = (int)(e % (size_t)H);
    at.n = e / (size_t)H;
    return at;
}

/* A grid-stride loop over [0, count): one thread per element. */
#define MW_GRID_STRIDE(i, count)                                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count);                    \
         i += (size_t)gridDim.x * blockDim.x)

#endif
