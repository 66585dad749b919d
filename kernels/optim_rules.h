/* The per-element update rules of Keras 3.6's optimizers (keras/src/optimizers/), written
 * once and compiled into the reference, the fast CPU path and the CUDA twins, so the three
 * agree bit for bit. Private to kernels/: included only by ref/optim.c, cpu/optim.c and
 * cuda/optim.cu, which define MW_OPTIM_HD first ("static inline", or "__device__ inline").
 *
 * Every rule first applies the decoupled weight decay to the parameter and the clipping to
 * the gradient (mw_optim_hyper in kernels.h), then Keras' update, in float32 as Keras does. */
#ifndef MW_KERNELS_OPTIM_RULES_H
#define MW_KERNELS_OPTIM_RULES_H

#include <math.h>

#include "kernels/kernels.h"

/* base_optimizer._apply_weight_decay: variable - variable * wd * lr */
MW_OPTIM_HD float rule_decay(float p, const mw_optim_hyper *h)
{
    return h->weight_decay > 0.0f ? p - p * h->weight_decay * h->decay_lr : p;
}

/* _clip_gradients: the norm clips as a factor, clipvalue as ops.clip(g, -v, v) */
MW_OPTIM_HD float rule_grad(float g, const mw_optim_hyper *h)
{
    g *= h->gscale;
    if (h->clipvalue > 0.0f)
        g = fminf(fmaxf(g, -h->clipvalue), h->clipvalue);
    return g;
}

/* SGD: m = m mu - g lr; p += m (nesterov: p += m mu - g lr); mu = 0: p -= g lr. s1 = m. */
MW_OPTIM_HD void rule_sgd(float *p, float *s1, float g0, const mw_optim_hyper *h)
{
    float q = rule_decay(*p, h), g = rule_grad(g0, h);
    if (h->momentum != 0.0f) {
        float m = *s1 * h->momentum - g * h->lr;
        *s1 = m;
        q += h->nesterov ? m * h->momentum - g * h->lr : m;
    } else {
        q -= g * h->lr;
    }
    *p = q;
}

/* Adam / AdamW (lr = alpha), as keras/src/optimizers/adam.py writes it:
 * m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); amsgrad: vhat = max(vhat, v), v = vhat;
 * p -= m alpha / (sqrt(v) + eps). s1 = m, s2 = v, s3 = vhat (amsgrad only).
 * With 1 - b1 and 1 - b2 rounded as Keras rounds them (mw_optim_hyper) and Keras' order of
 * operations, each step rounds exactly as Keras' does (tests/keras/optim_parity.py: bitwise
 * over 50 steps; the algebraically equal b1 m + (1 - b1) g is 1.2e-6 away). That form rounds
 * b1 m, as large as m, where Keras' rounds only the small increment before the one sum, and it
 * does not keep m == g fixed under a steady gradient.
 * Adam's first steps move a weight by about lr whatever the size of its gradient, so
 * near-zero gradients turn summation-order rounding into lr-sized differences between two
 * layouts in either form: tests/mpi/test_layout.sh compares what a layout can change, the
 * gradients. */
MW_OPTIM_HD void rule_adam(float *p, float *s1, float *s2, float *s3, float g0,
                           const mw_optim_hyper *h)
{
    float q = rule_decay(*p, h), g = rule_grad(g0, h);
    float m = *s1 + (g - *s1) * h->one_minus_beta1;
    float v = *s2 + (g * g - *s2) * h->one_minus_beta2;
    *s1 = m;
    *s2 = v;
    if (h->amsgrad) {
        v = fmaxf(*s3, v);
        *s3 = v;
    }
    *p = q - m * h->lr / (sqrtf(v) + h->epsilon);
}

/* RMSprop: ms = rho ms + (1 - rho) g^2; centered: mg = rho mg + (1 - rho) g, den = ms - mg^2
 * + eps, else den = ms + eps; inc = lr g / sqrt(den); momentum: mom = mu mom + inc, p -= mom;
 * else p -= inc. s1 = ms (Keras' velocity), s2 = mom, s3 = mg (average_gradient). */
MW_OPTIM_HD void rule_rmsprop(float *p, float *s1, float *s2, float *s3, float g0,
                              const mw_optim_hyper *h)
{
    float q = rule_decay(*p, h), g = rule_grad(g0, h);
    float ms = h->rho * *s1 + (1.0f - h->rho) * (g * g), den;
    *s1 = ms;
    if (h->centered) {
        float mg = h->rho * *s3 + (1.0f - h->rho) * g;
        *s3 = mg;
        den = ms - mg * mg + h->epsilon;
    } else {
        den = ms + h->epsilon;
    }
    float inc = h->lr * g / sqrtf(den);
    if (h->momentum > 0.0f) {
        float mom = h->momentum * *s2 + inc;
        *s2 = mom;
        q -= mom;
    } else {
        q -= inc;
    }
    *p = q;
}

/* Adagrad: acc += g^2; p -= lr g / sqrt(acc + eps). s1 = acc (starts at
 * initial_accumulator_value, which the caller fills). */
MW_OPTIM_HD void rule_adagrad(float *p, float *s1, float g0, const mw_optim_hyper *h)
{
    float q = rule_decay(*p, h), g = rule_grad(g0, h);
    float acc = *s1 + g * g;
    *s1 = acc;
    *p = q - h->lr * g / sqrtf(acc + h->epsilon);
}

/* Adamax: m += (g - m)(1 - b1); u = max(b2 u, |g|); p -= lr m / ((1 - b1^t)(u + eps)), as
 * keras/src/optimizers/adamax.py writes it (bias1 = 1 - b1^t in float32). s1 = m, s2 = u. */
MW_OPTIM_HD void rule_adamax(float *p, float *s1, float *s2, float g0, const mw_optim_hyper *h)
{
    float q = rule_decay(*p, h), g = rule_grad(g0, h);
    float m = *s1 + (g - *s1) * h->one_minus_beta1;
    float u = fmaxf(h->beta2 * *s2, fabsf(g));
    *s1 = m;
    *s2 = u;
    *p = q - h->lr * m / (h->bias1 * (u + h->epsilon));
}

#endif
