/* KerasHub's RotaryEmbedding arithmetic (kernels/kernel_list.h: rope_fwd, rope_bwd), written
 * once for the reference (kernels/ref/rope.c), the fast CPU twin (kernels/cpu/rope.c) and the
 * CUDA twin (kernels/cuda/rope.cu), in the float32 steps KerasHub 0.32 takes: the inverse
 * frequency max_wavelength ^ -(2j / denom) divided by the scaling factor, the position
 * arange(T) + start as floats, their product, then its cosine and sine. The rotation pairs
 * feature j with j + width / 2 of the same group (the halves, KerasHub's rotate_half, not
 * interleaved pairs). Private to kernels/: each includer defines MW_ROPE_HD first (static
 * inline, or __device__ static inline). */
#ifndef MW_KERNELS_ROPE_RULES_H
#define MW_KERNELS_ROPE_RULES_H

#include <math.h>

/* The angle of pair j at step t: (t + start) * (max_wavelength ^ -(2j / denom) / scale). */
MW_ROPE_HD float rope_angle(int t, int j, int start, int denom, float max_wavelength, float scale)
{
    const float e = (float)(2 * j) / (float)denom;
    const float inv = powf(max_wavelength, -e) / scale;
    return ((float)t + (float)start) * inv;
}

/* One pair forward: (x0, x1) -> (x0 c - x1 s, x1 c + x0 s), KerasHub's x cos + rotate_half(x)
 * sin with rotate_half(x) = (-x1, x0). Both read before either is written (y may be x). */
MW_ROPE_HD void rope_pair_fwd(float *y0, float *y1, float x0, float x1, float c, float s)
{
    *y0 = x0 * c + -x1 * s;
    *y1 = x1 * c + x0 * s;
}

/* One pair backward: the transposed rotation of (d0, d1) added to dx0, dx1. */
MW_ROPE_HD void rope_pair_bwd(float *dx0, float *dx1, float d0, float d1, float c, float s)
{
    *dx0 += d0 * c + d1 * s;
    *dx1 += d1 * c - d0 * s;
}

/* The pair at e and e + h of out from in's: rope_pair_fwd (bwd 0) or rope_pair_bwd (bwd 1). */
MW_ROPE_HD void rope_pair(float *out, const float *in, size_t e, size_t h, float c, float s,
                          int bwd)
{
    if (bwd)
        rope_pair_bwd(&out[e], &out[e + h], in[e], in[e + h], c, s);
    else
        rope_pair_fwd(&out[e], &out[e + h], in[e], in[e + h], c, s);
}

#endif
