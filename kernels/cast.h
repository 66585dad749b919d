/* Mixed precision's casts: float32 to bfloat16 or float16 and back, in place (see kernels.h
 * for the table's contract). Keras' mixed_bfloat16 and mixed_float16 keep float32 variables
 * and compute each layer in 16 bits; mwtrain keeps every buffer float32 and rounds the values
 * a 16-bit tensor would hold (worker/model/model.c says where), so a product of two rounded values
 * is exact in float32 (8 + 8 or 11 + 11 significant bits, at most 24) and a float32 sum of
 * them is what a 16-bit matrix unit with float32 accumulation gives.
 *
 * Rounding is to nearest, ties to even, as ml_dtypes, TensorFlow and XLA convert: a NaN stays
 * a (quiet) NaN with its sign and top payload bits, and a finite value past the format's
 * largest (bfloat16 3.3895e38, float16 65504) becomes infinity. bfloat16's subnormals round
 * like any other value; float16's smallest normal is 2^-14, and below it the values are the
 * multiples of 2^-24 (its subnormals), so a float32 under 2^-25 becomes a (signed) zero:
 * the underflow that mixed_float16's loss scaling is there to avoid. */
#ifndef MW_KERNELS_CAST_H
#define MW_KERNELS_CAST_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

static inline float mw_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    /* a NaN keeps its sign and top payload, made quiet; branch-free, so loops vectorize */
    const uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t q = (u | 0x00400000u) & 0xffff0000u;
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = nan ? q : r;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* float16: the 13 low bits of the significand rounded off above 2^-14 (an overflow past 65504
 * gives infinity), and below it x + 0.5 - 0.5, which rounds |x| to a multiple of 2^-24 in
 * float32's own round-to-nearest-even (the ulp of [0.5, 1) is 2^-24). Branch-free. */
static inline float mw_f16_round(float x)
{
    uint32_t u, sub_u;
    memcpy(&u, &x, sizeof u);
    const uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
    const uint32_t nan = a > 0x7f800000u;
    const uint32_t q = (u | 0x00400000u) & 0xffffe000u;
    uint32_t n = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
    n = n > 0x477fe000u ? 0x7f800000u : n; /* 0x477fe000: 65504 */
    float ax;
    memcpy(&ax, &a, sizeof ax);
    const float sub = (ax + 0.5f) - 0.5f;
    memcpy(&sub_u, &sub, sizeof sub_u);
    u = nan ? q : sign | (a < 0x38800000u ? sub_u : n); /* 0x38800000: 2^-14 */
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
