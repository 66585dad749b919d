/* Keras 3.6's learning-rate schedules, formula by formula (see schedule.h), in double. */
#include "worker/schedule.h"

#include <math.h>

static const char *const names[] = {
    "constant",         "ExponentialDecay", "PiecewiseConstantDecay", "PolynomialDecay",
    "InverseTimeDecay", "CosineDecay",      "CosineDecayRestarts"};
_Static_assert(sizeof names / sizeof *names == MW_SCHED_COSINE_RESTARTS + 1,
               "a name per mw_sched_kind");

const char *mw_schedule_name(mw_sched_kind kind)
{
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "?";
}

/* PiecewiseConstantDecay: values[0] while step <= boundaries[0], values[i] while
 * boundaries[i-1] < step <= boundaries[i], the last value after the last boundary. */
static double piecewise(const mw_schedule *s, double step)
{
    int i = 0;
    while (i < s->nboundaries && step > s->boundaries[i])
        i++;
    return s->values[i];
}

static double polynomial(const mw_schedule *s, double step)
{
    double steps = s->decay_steps;
    if (s->cycle)
        steps *= step == 0.0 ? 1.0 : ceil(step / s->decay_steps);
    else
        step = fmin(step, steps);
    double p = step / steps;
    return (s->initial - s->end_lr) * pow(1.0 - p, s->power) + s->end_lr;
}

/* CosineDecay's _decay_function */
static double cosine_decay(double alpha, double step, double steps, double from)
{
    double cosine = 0.5 * (1.0 + cos(M_PI * (step / steps)));
    return from * ((1.0 - alpha) * cosine + alpha);
}

static double cosine(const mw_schedule *s, double step)
{
    if (!s->warmup)
        return cosine_decay(s->alpha, fmin(step, s->decay_steps), s->decay_steps, s->initial);
    step = fmin(step, s->decay_steps + s->warmup_steps);
    if (step < s->warmup_steps)
        return (s->warmup_target - s->initial) * (step / s->warmup_steps) + s->initial;
    return cosine_decay(s->alpha, step - s->warmup_steps, s->decay_steps, s->warmup_target);
}

static double cosine_restarts(const mw_schedule *s, double step)
{
    double frac = step / s->decay_steps, i_restart;
    if (s->t_mul == 1.0) {
        i_restart = floor(frac);
        frac -= i_restart;
    } else {
        i_restart = floor(log(1.0 - frac * (1.0 - s->t_mul)) / log(s->t_mul));
        double sum_r = (1.0 - pow(s->t_mul, i_restart)) / (1.0 - s->t_mul);
        frac = (frac - sum_r) / pow(s->t_mul, i_restart);
    }
    double cosined = 0.5 * pow(s->m_mul, i_restart) * (1.0 + cos(M_PI * frac));
    return s->initial * ((1.0 - s->alpha) * cosined + s->alpha);
}

double mw_schedule_rate(const mw_schedule *s, double constant, long step)
{
    double t = (double)step, p;
    switch (s->kind) {
    case MW_SCHED_EXPONENTIAL:
        p = t / s->decay_steps;
        return s->initial * pow(s->decay_rate, s->staircase ? floor(p) : p);
    case MW_SCHED_PIECEWISE:
        return piecewise(s, t);
    case MW_SCHED_POLYNOMIAL:
        return polynomial(s, t);
    case MW_SCHED_INVERSE_TIME:
        p = t / s->decay_steps;
        return s->initial / (1.0 + s->decay_rate * (s->staircase ? floor(p) : p));
    case MW_SCHED_COSINE:
        return cosine(s, t);
    case MW_SCHED_COSINE_RESTARTS:
        return cosine_restarts(s, t);
    case MW_SCHED_CONSTANT:
    default:
        return constant;
    }
}
