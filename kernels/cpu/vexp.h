/* Vectorizable exponentials of the fast CPU path: a softmax's exp of non-positive exponents
 * (attention.c) and the logistic sigmoid of SiLU (activation.c), written as selects without
 * branches or calls so that their loops vectorize (the math library's expf is a call per
 * element). Private to kernels/cpu/; each includer includes it after
 * `#pragma GCC optimize("no-trapping-math")` (GCC vectorizes a comparison's select only so, and
 * vectorizes the loops that inline these only when both were compiled under the same options). */
#ifndef MW_KERNELS_CPU_VEXP_H
#define MW_KERNELS_CPU_VEXP_H

#include <stdint.h>

/* exp(x) for x <= 0: 2^n p(r), n = round(x log2 e), r = x - n ln 2 in two parts, p Cephes'
 * degree-7 polynomial of expf (relative error below 2 ulp); below -87, where the result would
 * be subnormal, 0 (at most 1e-38 against expf's); a NaN stays NaN. */
static inline float mw_exp_neg(float x)
{
    const float keep = x < -87.0f ? 0.0f : 1.0f;
    x = x < -87.0f ? -87.0f : x;
    x = x > 0.0f ? 0.0f : x;
    const float big = 12582912.0f; /* 1.5 x 2^23: adding it rounds to an integer */
    const float n = (x * 1.44269504088896341f + big) - big;
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        uint32_t i;
        float f;
    } s;
    s.i = (uint32_t)((int32_t)n + 127) << 23; /* 2^n: -126 <= n <= 0 here */
    return p * s.f * keep;
}

/* 1 / (1 + exp(-x)) from exp(-|x|) <= 1 (no overflow): within a few ulp of the reference's
 * 1 / (1 + expf(-x)); 0 where x < -87 (the reference's is below 2e-38 there); NaN for NaN. */
static inline float mw_sigmoid_v(float x)
{
    const float e = mw_exp_neg(x < 0.0f ? x : -x);
    const float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

#endif
