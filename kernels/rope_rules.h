/* KerasHub's RotaryEmbedding arithmetic (kernels/kernel_list.h: rope_fwd, rope_bwd), written
 * once for the reference (kernels/ref/rope.c), the fast CPU twin (kernels/cpu/rope.c) and the
 * CUDA twin (kernels/cuda/rope.cu), in the float32 steps KerasHub 0.32 takes: the inverse
 * frequency max_wavelength ^ -(2j / denom) divided by the scaling factor, the position
 * arange(T) + start as floats, their product, then its cosine and sine. The rotation pairs
 * feature j with j + width / 2 of the same group (the halves, KerasHub's rotate_half, not
 * interleaved pairs). Under a 16-bit policy (half 1: bfloat16, 2: float16) every step KerasHub
 * takes in the compute dtype is rounded to it: the cosine and sine (cast to it), each product
 * (x cos, rotate_half(x) sin) and their sum; the gradient likewise (dy cos, dy sin and their sum,
 * JAX's gradient of those 16-bit steps). Private to kernels/: each includer defines MW_ROPE_HD
 * first (static inline, or __device__ static inline) and MW_ROPE_ROUND16(half, x) (kernels/cast.h's
 * rounding to bfloat16 for half 1, to float16 for 2, or their device copies). */
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

/* x rounded to the format half names (0: float32, x itself). */
MW_ROPE_HD float rope_r(int half, float x)
{
    return half ? MW_ROPE_ROUND16(half, x) : x;
}

/* One pair forward: (x0, x1) -> (x0 c - x1 s, x1 c + x0 s), KerasHub's x cos + rotate_half(x)
 * sin with rotate_half(x) = (-x1, x0). Both read before either is written (y may be x). */
MW_ROPE_HD void rope_pair_fwd(float *y0, float *y1, float x0, float x1, float c, float s, int half)
{
    if (!half) {
        *y0 = x0 * c + -x1 * s;
        *y1 = x1 * c + x0 * s;
        return;
    }
    /* the products of 16-bit values are exact in float32; each is rounded as KerasHub's is */
    c = rope_r(half, c), s = rope_r(half, s);
    const float a0 = rope_r(half, x0 * c), b0 = rope_r(half, -x1 * s);
    const float a1 = rope_r(half, x1 * c), b1 = rope_r(half, x0 * s);
    *y0 = rope_r(half, a0 + b0);
    *y1 = rope_r(half, a1 + b1);
}

/* One pair backward: the transposed rotation of (d0, d1) added to dx0, dx1 (under a 16-bit
 * policy: d c and d s rounded, then their sums, then added). */
MW_ROPE_HD void rope_pair_bwd(float *dx0, float *dx1, float d0, float d1, float c, float s,
                              int half)
{
    if (!half) {
        *dx0 += d0 * c + d1 * s;
        *dx1 += d1 * c - d0 * s;
        return;
    }
    c = rope_r(half, c), s = rope_r(half, s);
    *dx0 += rope_r(half, rope_r(half, d0 * c) + rope_r(half, d1 * s));
    *dx1 += rope_r(half, rope_r(half, d1 * c) - rope_r(half, d0 * s));
}

/* The pair at e and e + h of out from in's: rope_pair_fwd (bwd 0) or rope_pair_bwd (bwd 1). */
MW_ROPE_HD void rope_pair(float *out, const float *in, size_t e, size_t h, float c, float s,
                          int bwd, int half)
{
    if (bwd)
        rope_pair_bwd(&out[e], &out[e + h], in[e], in[e + h], c, s, half);
    else
        rope_pair_fwd(&out[e], &out[e + h], in[e], in[e + h], c, s, half);
}

#endif
