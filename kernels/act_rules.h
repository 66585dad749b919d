/* The activations' value and slope (Keras 3.15's keras/src/activations/), written once
 * for the reference, the fast CPU and the CUDA twins ({ref,cpu,cuda}/activation.*). Private to
 * kernels/: each includer defines MW_ACT_HD first ("static inline", or
 * "__device__ static inline"). The math library's expf, tanhf and erff differ between the
 * host and the device in the last bits; the formulas do not. */
#ifndef MW_KERNELS_ACT_RULES_H
#define MW_KERNELS_ACT_RULES_H

#include <math.h>

#include "kernels/kernels.h"

#define MW_SQRT_2_PI 0.7978845608028654f /* sqrt(2 / pi) */

MW_ACT_HD float act_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* jax.nn.hard_sigmoid: relu6(x + 3) / 6, and its slope [0 < x + 3 < 6] / 6 */
MW_ACT_HD float act_hard_sigmoid(float x)
{
    const float t = x + 3.0f;
    return (t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t) / 6.0f;
}

MW_ACT_HD float act_hard_sigmoid_slope(float x)
{
    const float t = x + 3.0f;
    return t > 0.0f && t < 6.0f ? 1.0f / 6.0f : 0.0f;
}

/* y = f(x) */
MW_ACT_HD float act_value(float v, mw_act_kind kind, float alpha)
{
    switch (kind) {
    case MW_ACTK_SIGMOID:
        return act_sigmoid(v);
    case MW_ACTK_TANH:
        return tanhf(v);
    case MW_ACTK_GELU:
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case MW_ACTK_GELU_TANH:
        return 0.5f * v * (1.0f + tanhf(MW_SQRT_2_PI * (v + 0.044715f * v * v * v)));
    case MW_ACTK_SILU:
        return v * act_sigmoid(v);
    case MW_ACTK_ELU:
        return v > 0.0f ? v : alpha * expm1f(v);
    case MW_ACTK_LEAKY_RELU:
        return v >= 0.0f ? v : alpha * v;
    case MW_ACTK_RELU6: /* min(max(x, 0), 6); NaN stays NaN */
        return v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
    case MW_ACTK_HARD_SIGMOID:
        return act_hard_sigmoid(v);
    case MW_ACTK_HARD_SILU: /* x * hard_sigmoid(x) */
        return v * act_hard_sigmoid(v);
    case MW_ACTK_COUNT:
        break;
    }
    return 0.0f;
}

/* f'(x), given x = v and y = o */
MW_ACT_HD float act_slope(float v, float o, mw_act_kind kind, float alpha)
{
    float s, t;
    switch (kind) {
    case MW_ACTK_SIGMOID:
        return o * (1.0f - o);
    case MW_ACTK_TANH:
        return 1.0f - o * o;
    case MW_ACTK_GELU: /* Phi(x) + x phi(x) */
        return 0.5f * (1.0f + erff(v * 0.70710678118654752f)) +
               v * 0.3989422804014327f * expf(-0.5f * v * v);
    case MW_ACTK_GELU_TANH:
        t = tanhf(MW_SQRT_2_PI * (v + 0.044715f * v * v * v));
        return 0.5f * (1.0f + t) +
               0.5f * v * (1.0f - t * t) * MW_SQRT_2_PI * (1.0f + 3.0f * 0.044715f * v * v);
    case MW_ACTK_SILU:
        s = act_sigmoid(v);
        return s * (1.0f + v * (1.0f - s));
    case MW_ACTK_ELU:
        return v > 0.0f ? 1.0f : alpha * expf(v);
    case MW_ACTK_LEAKY_RELU:
        return v >= 0.0f ? 1.0f : alpha;
    case MW_ACTK_RELU6: /* jax.nn.relu6's: 0 at both kinks */
        return v > 0.0f && v < 6.0f ? 1.0f : 0.0f;
    case MW_ACTK_HARD_SIGMOID:
        return act_hard_sigmoid_slope(v);
    case MW_ACTK_HARD_SILU: /* the product rule */
        return act_hard_sigmoid(v) + v * act_hard_sigmoid_slope(v);
    case MW_ACTK_COUNT:
        break;
    }
    return 0.0f;
}

/* Keras 3.15's ReLU(max_value M, negative_slope s, threshold t) (activations.ReLU.static_call,
 * t >= 0): x where x > t else 0, clipped to [0, M] (M INFINITY: no clip), minus
 * s * relu(t - x); with s = 0 nothing is subtracted. */
MW_ACT_HD float relux_value(float v, float M, float s, float t)
{
    float a = v > t ? v : 0.0f;
    a = a < M ? a : M;
    return s != 0.0f ? a - s * (t - v > 0.0f ? t - v : 0.0f) : a;
}

/* Its slope as jax differentiates it: [t < x < M] + s [x < t]; where Keras computes it as
 * leaky_relu (s != 0, no M, t = 0), jax.nn.leaky_relu's 1 at x = 0. */
MW_ACT_HD float relux_slope(float v, float M, float s, float t)
{
    if (s != 0.0f && t == 0.0f && M == INFINITY)
        return v >= 0.0f ? 1.0f : s;
    return (v > t && v < M ? 1.0f : 0.0f) + (v < t ? s : 0.0f);
}

#endif
