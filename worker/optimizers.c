/* The optimizer table's rows and the update math both replica backends share; see
 * optimizers.h. */
#include "worker/optimizers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static void adam_step(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                      float *s1, float *s2, float *s3, const float *g, size_t count,
                      const mw_optim_hyper *h)
{
    kt->adam_step(k, p, s1, s2, o->amsgrad ? s3 : NULL, g, count, h);
}

static void sgd_step(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                     float *s1, float *s2, float *s3, const float *g, size_t count,
                     const mw_optim_hyper *h)
{
    (void)s2, (void)s3;
    kt->sgd_step(k, p, o->momentum != 0 ? s1 : NULL, NULL, NULL, g, count, h);
}

static void rmsprop_step(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                         float *s1, float *s2, float *s3, const float *g, size_t count,
                         const mw_optim_hyper *h)
{
    kt->rmsprop_step(k, p, s1, o->momentum > 0 ? s2 : NULL, o->centered ? s3 : NULL, g, count, h);
}

static double adagrad_start(const mw_train_opts *o)
{
    return o->initial_accumulator;
}

static void adagrad_step(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                         float *s1, float *s2, float *s3, const float *g, size_t count,
                         const mw_optim_hyper *h)
{
    (void)o, (void)s2, (void)s3;
    kt->adagrad_step(k, p, s1, NULL, NULL, g, count, h);
}

static void adamax_step(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                        float *s1, float *s2, float *s3, const float *g, size_t count,
                        const mw_optim_hyper *h)
{
    (void)o, (void)s3;
    kt->adamax_step(k, p, s1, s2, NULL, g, count, h);
}

static const mw_optimizer_row rows[] = {
    [MW_OPT_ADAM] = {.keras = "Adam",
                     .keys = {"beta_1", "beta_2", "epsilon", "amsgrad"},
                     .lr = 0.001,
                     .slots_lo = 2,
                     .slots_hi = 3,
                     .slots_what = "2 or 3: m, v and with amsgrad vhat",
                     .slots = 2,
                     .amsgrad_slot = 1,
                     .bias_corrected = 1,
                     .step = adam_step,
                     .keras_slots = 2,
                     .keras_hyper = {"beta_1", "beta_2", "epsilon"}},
    /* SGD's momentum slot is kept even at momentum 0: checkpoints hold 0 or 1 */
    [MW_OPT_SGD] = {.keras = "SGD",
                    .keys = {"momentum", "nesterov"},
                    .lr = 0.01,
                    .slots_lo = 0,
                    .slots_hi = 1,
                    .slots_what = "0 or 1: the momentum",
                    .slots = 1,
                    .step = sgd_step,
                    .keras_slots = 1,
                    .keras_hyper = {"momentum"},
                    .keras_name = "SGD",
                    .legacy_steps = 1},
    [MW_OPT_ADAMW] = {.keras = "AdamW",
                      .keys = {"beta_1", "beta_2", "epsilon", "amsgrad"},
                      .lr = 0.001,
                      .weight_decay = 0.004,
                      .slots_lo = 2,
                      .slots_hi = 3,
                      .slots_what = "2 or 3: m, v and with amsgrad vhat",
                      .slots = 2,
                      .amsgrad_slot = 1,
                      .bias_corrected = 1,
                      .step = adam_step,
                      .keras_hyper = {"beta_1", "beta_2", "epsilon"}},
    [MW_OPT_RMSPROP] = {.keras = "RMSprop",
                        .keys = {"rho", "momentum", "epsilon", "centered"},
                        .lr = 0.001,
                        .slots_lo = 1,
                        .slots_hi = 3,
                        .slots_what = "1 to 3: velocity, momentum, average gradient",
                        .slots = 3,
                        .step = rmsprop_step},
    [MW_OPT_ADAGRAD] = {.keras = "Adagrad",
                        .keys = {"initial_accumulator_value", "epsilon"},
                        .lr = 0.001,
                        .slots_lo = 1,
                        .slots_hi = 1,
                        .slots_what = "1: the accumulator",
                        .slots = 1,
                        .slot1_start = adagrad_start,
                        .step = adagrad_step},
    [MW_OPT_ADAMAX] = {.keras = "Adamax",
                       .keys = {"beta_1", "beta_2", "epsilon"},
                       .lr = 0.001,
                       .slots_lo = 2,
                       .slots_hi = 2,
                       .slots_what = "2: m and the infinity norm u",
                       .slots = 2,
                       .step = adamax_step},
};
_Static_assert(sizeof rows / sizeof *rows == MW_OPT_COUNT, "a row per mw_optimizer");

const mw_optimizer_row *mw_optimizer_row_of(mw_optimizer id)
{
    return &rows[(unsigned)id < MW_OPT_COUNT ? id : MW_OPT_ADAM];
}

int mw_optimizer_find(const char *name, int keras)
{
    for (int i = 0; i < MW_OPT_COUNT; i++)
        if (keras ? !strcasecmp(name, rows[i].keras) : !strcmp(name, mw_optimizer_names[i]))
            return i;
    return -1;
}

const char *mw_optimizer_list(int keras)
{
    static char list[2][256];
    char *s = list[keras != 0];
    if (s[0])
        return s;
    size_t used = 0;
    for (int i = 0; i < MW_OPT_COUNT && used < sizeof list[0]; i++)
        used += (size_t)snprintf(s + used, sizeof list[0] - used, "%s%s",
                                 i == 0                 ? ""
                                 : i + 1 < MW_OPT_COUNT ? ", "
                                                        : " or ",
                                 keras ? rows[i].keras : mw_optimizer_names[i]);
    return s;
}

/* ---- the update math ---- */

double mw_optimizer_lr(const mw_train_opts *o, long step)
{
    return mw_schedule_rate(&o->schedule, o->learning_rate, step);
}

void mw_optimizer_hyper(const mw_train_opts *o, long *opt_step, mw_optim_hyper *h)
{
    const double lr = mw_optimizer_lr(o, *opt_step), t = (double)++*opt_step;
    memset(h, 0, sizeof *h);
    h->lr = (float)lr;
    if (mw_optimizer_row_of(o->optimizer)->bias_corrected) { /* Keras: in float32,
                                                                local_step = iterations + 1 */
        const float b1p = powf((float)o->beta1, (float)t), b2p = powf((float)o->beta2, (float)t);
        h->lr = (float)lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
    }
    h->weight_decay = (float)o->weight_decay;
    h->decay_lr = (float)lr;
    h->gscale = 1.0f;
    h->clipvalue = (float)o->clipvalue;
    h->one_minus_beta1 = (float)(1.0 - o->beta1), h->one_minus_beta2 = (float)(1.0 - o->beta2);
    h->epsilon = (float)o->epsilon;
    h->momentum = (float)o->momentum;
    h->rho = (float)o->rho;
    h->beta2 = (float)o->beta2;
    h->bias1 = 1.0f - powf((float)o->beta1, (float)t); /* Keras: in float32 */
    h->nesterov = o->nesterov, h->amsgrad = o->amsgrad, h->centered = o->centered;
}

int mw_optimizer_slots(const mw_train_opts *o)
{
    const mw_optimizer_row *r = mw_optimizer_row_of(o->optimizer);
    return r->slots + (r->amsgrad_slot && o->amsgrad);
}

void mw_optimizer_init_slots(const mw_train_opts *o, float *m1, float *m2, float *m3, size_t count)
{
    const mw_optimizer_row *r = mw_optimizer_row_of(o->optimizer);
    memset(m1, 0, count * sizeof *m1);
    memset(m2, 0, count * sizeof *m2);
    memset(m3, 0, count * sizeof *m3);
    if (r->slot1_start)
        for (size_t i = 0; i < count; i++)
            m1[i] = (float)r->slot1_start(o);
}

/* One rule over [off, off + count) of every array. */
static void rule(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                 float *const s[3], const float *g, size_t off, size_t count,
                 const mw_optim_hyper *h)
{
    mw_optimizer_row_of(o->optimizer)
        ->step(o, kt, k, p + off, s[0] + off, s[1] + off, s[2] + off, g + off, count, h);
}

/* Keras' clip_by_norm factor of the gradient g * unscale, times unscale: the gscale that
 * clips it (unscale: 1, or 1 / the loss scale, a power of 2, so both products are exact). */
static float norm_scale(const mw_kernels *kt, const mw_kctx *k, const float *g, size_t count,
                        double clip, float unscale)
{
    double ss;
    kt->sumsq(k, &ss, g, count);
    double norm = sqrt(ss) * unscale;
    return unscale * (float)(clip / (norm > clip ? norm : clip));
}

int mw_grads_finite(const mw_kernels *kt, const mw_kctx *k, const float *g, size_t count)
{
    double ss;
    kt->sumsq(k, &ss, g, count);
    return isfinite(ss);
}

void mw_optimizer_apply(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model *m, float *p, float *const s[3], const float *g,
                        size_t count, const mw_optim_hyper *h)
{
    mw_optim_hyper hh = *h;
    if (o->clipnorm > 0) { /* per variable: each layer's kernel and bias */
        for (int i = 0; i < m->nlayers; i++) {
            const mw_layer *L = &m->layers[i];
            size_t offs[2] = {L->w_off, L->b_off}, counts[2] = {L->w_count, L->b_count};
            for (int t = 0; t < 2; t++) {
                if (!counts[t] || (t == 1 && !L->has_bias))
                    continue;
                hh.gscale = norm_scale(kt, k, g + offs[t], counts[t], o->clipnorm, h->gscale);
                rule(o, kt, k, p, s, g, offs[t], counts[t], &hh);
            }
        }
        return;
    }
    if (o->global_clipnorm > 0)
        hh.gscale = norm_scale(kt, k, g, count, o->global_clipnorm, h->gscale);
    rule(o, kt, k, p, s, g, 0, count, &hh);
}
