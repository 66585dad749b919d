/* Learning-rate schedules as Keras 3.6 computes them (keras/src/optimizers/schedules/
 * learning_rate_schedule.py): the rate of the optimizer's step number `step`, counted from 0
 * (Keras' optimizer.iterations before the update), so a resumed run continues the schedule
 * where it stopped. Plain math, no I/O: worker/keras/optimizer.h reads them from Keras JSON. */
#ifndef MW_WORKER_SCHEDULE_H
#define MW_WORKER_SCHEDULE_H

typedef enum {
    MW_SCHED_CONSTANT, /* the optimizer's learning_rate, a number */
    MW_SCHED_EXPONENTIAL,
    MW_SCHED_PIECEWISE,
    MW_SCHED_POLYNOMIAL,
    MW_SCHED_INVERSE_TIME,
    MW_SCHED_COSINE,
    MW_SCHED_COSINE_RESTARTS,
} mw_sched_kind;

/* PiecewiseConstantDecay's most boundaries: a boundary per epoch for a few thousand epochs.
 * (It was 64, short of a plain 100-epoch config.) */
#define MW_SCHED_MAX_BOUNDARIES 4096

/* The fields a kind uses, Keras' config names in comments. Zeroed: constant. */
typedef struct {
    mw_sched_kind kind;
    double initial;     /* initial_learning_rate */
    double decay_steps; /* decay_steps; CosineDecayRestarts: first_decay_steps (> 0) */
    double decay_rate;  /* ExponentialDecay, InverseTimeDecay */
    int staircase;      /* ExponentialDecay, InverseTimeDecay */
    double end_lr;      /* PolynomialDecay end_learning_rate */
    double power;       /* PolynomialDecay */
    int cycle;          /* PolynomialDecay */
    double alpha;       /* CosineDecay, CosineDecayRestarts */
    int warmup;         /* CosineDecay: warmup_target is not null */
    double warmup_target, warmup_steps;
    double t_mul, m_mul; /* CosineDecayRestarts */
    int nboundaries;     /* PiecewiseConstantDecay: values has nboundaries + 1 entries */
    double boundaries[MW_SCHED_MAX_BOUNDARIES], values[MW_SCHED_MAX_BOUNDARIES + 1];
} mw_schedule;

/* The rate at optimizer step `step` (>= 0); a constant schedule returns `constant`. */
double mw_schedule_rate(const mw_schedule *s, double constant, long step);
/* Keras' class name of s->kind ("CosineDecay"); "constant" for a number. Static. */
const char *mw_schedule_name(mw_sched_kind kind);

#endif
