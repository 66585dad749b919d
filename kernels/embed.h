/* Embedding's twins and the padding mask's mean (see kernels.h: mw_embed_fwd_fn,
 * mw_embed_bwd_fn, mw_masked_mean_fwd_fn, mw_masked_mean_bwd_fn); the CPU table takes the
 * reference's (a gather, a scatter-add, a masked sum: memory-bound, n x T x D values). */
#ifndef MW_KERNELS_EMBED_H
#define MW_KERNELS_EMBED_H

#include "kernels/kernels.h"

/* SinePositionEncoding's value at step t, feature j (kernels.h: mw_sine_pos_fn), for the
 * reference and the CUDA twin: each includer defines MW_SINE_HD first (static inline, or
 * __device__ static inline). */
#ifdef MW_SINE_HD
MW_SINE_HD float mw_sine_pos_value(int t, int j, int D, float max_wavelength)
{
    const float min_freq = (float)(1.0 / (double)max_wavelength); /* Keras: 1 / w in Python */
    const float w = powf(min_freq, (float)(2 * (j / 2)) / (float)D);
    const float a = (float)t * w;
    return j % 2 ? cosf(a) : sinf(a);
}
#endif

/* The row of an id held as a float: its index in [0, V), or -1 (not an integer in range). */
static inline long mw_embed_row(float id, int V)
{
    return id >= 0.0f && id < (float)V && id == (float)(long)id ? (long)id : -1;
}

/* Floats of device scratch the CUDA twin of embed_bwd (kernels/cuda/embed.cu) needs for
 * `positions` token ids (n T) of a table of V rows: its sorted (row, position) pairs and the
 * sort's own room (CUB's size query on the current device). 0 for no positions, more than
 * INT_MAX, or a failed query. The GPU backend reserves the most any Embedding needs; the kernel
 * checks it and fails naming the workspace. */
size_t mw_cuda_embed_ws(size_t positions, int V);

#endif
