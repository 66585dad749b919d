/* Mixed precision's casts: float32 to bfloat16 and back, in place (see kernels.h for the
 * table's contract). Keras' mixed_bfloat16 keeps float32 variables and computes each layer in
 * bfloat16; mwtrain keeps every buffer float32 and rounds the values a bfloat16 tensor would
 * hold (worker/model.c says where), so a product of two rounded values is exact in float32
 * and a float32 sum of them is what a bfloat16 matrix unit with float32 accumulation gives.
 *
 * Rounding is to nearest, ties to even, as ml_dtypes, TensorFlow and XLA convert: a NaN stays
 * a (quiet) NaN, a finite value past bfloat16's largest (3.3895e38) becomes infinity, and
 * subnormals round like any other value. */
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

#define MW_CAST_DECL(sfx) void mw_round_bf16_##sfx(const mw_kctx *k, float *p, size_t count);
MW_CAST_DECL(ref)
MW_CAST_DECL(cpu)
MW_CAST_DECL(cuda)
#undef MW_CAST_DECL

#endif
