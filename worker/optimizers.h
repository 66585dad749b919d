/* The optimizer table: one row per Keras optimizer (mw_optimizer, named in worker/opts.h),
 * stating once what the training system needs of it: its Keras class, config keys and
 * defaults (worker/keras/optimizer.c reads configs with them), its slot arrays (how many a run
 * keeps, how many a checkpoint may hold, their start), its step (the rule's kernel entry,
 * kernels/optim.h), and what an export to Keras writes of it. Below the rows, the update
 * math both replica backends share: the step's scalars, clipping, and the rule over the
 * arenas. Lives in mwtrain itself; the GPU module calls it through the binary's symbols.
 *
 * A new optimizer is its X entry in worker/opts.h, its row in optimizers.c, and its rule
 * (kernels/optim_rules.h) with a kernel-table entry (kernels/kernels.h, kernels/optim.h) and
 * its twins in kernels/ref, cpu and cuda. */
#ifndef MW_WORKER_OPTIMIZERS_H
#define MW_WORKER_OPTIMIZERS_H

#include <stddef.h>

#include "kernels/kernels.h"
#include "worker/model/model.h"
#include "worker/opts.h"

typedef struct {
    const char *keras;      /* Keras' class name ("Adam") */
    const char *keys[6];    /* its own config keys, beyond learning_rate, weight_decay and clipping
                               (NULL-terminated) */
    double lr;              /* Keras' default learning_rate */
    double weight_decay;    /* Keras' default weight_decay */
    double beta2;           /* Keras' default beta_2 where it has one (0: 0.999) */
    int slots_lo, slots_hi; /* the slot arrays a checkpoint of it may hold */
    const char *slots_what; /* what they are, for messages */
    int slots;              /* the slot arrays a run keeps (m1, m2, m3; RMSprop keeps all 3) */
    int amsgrad_slot;       /* and one more with amsgrad (Adam's vhat) */
    /* The first slot's value at the start (Adagrad's initial accumulator); NULL: 0. */
    double (*slot1_start)(const mw_train_opts *o);
    int bias_corrected; /* Adam's step size lr sqrt(1 - b2^t) / (1 - b1^t) goes in h->lr */
    /* One update over count floats: p, the slots s1..s3 (NULL where o keeps fewer), the
     * gradients g, through the kernel table. */
    void (*step)(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                 float *s1, float *s2, float *s3, const float *g, size_t count,
                 const mw_optim_hyper *h);
    /* An export to Keras: the slot arrays it writes as Keras' optimizer variables (Adam: m
     * and v; SGD: the momentum; 0: it leaves the state out, and Keras starts afresh), and the
     * hyperparameters compile_config records besides learning_rate (NULL-terminated; of
     * "momentum", "beta_1", "beta_2", "epsilon"). */
    int keras_slots;
    const char *keras_hyper[4];
    const char *keras_name; /* the config's name Keras gives it when it is not ours ("SGD") */
    /* Its checkpoints from before schedules recorded no iterations (SGD): an opt_step of 0
     * there means the global step. */
    int legacy_steps;
} mw_optimizer_row;

/* The row of id (< MW_OPT_COUNT). */
const mw_optimizer_row *mw_optimizer_row_of(mw_optimizer id);
/* The optimizer named name (mw_optimizer_names: "adam"), or with keras the one of Keras class
 * name (case-insensitive, as Keras' get() matches); -1 when none. */
int mw_optimizer_find(const char *name, int keras);
/* "adam, sgd, ... or adagrad" (keras 0) or "SGD, Adam, ... or Adagrad" (keras 1), for
 * messages (static). */
const char *mw_optimizer_list(int keras);

/* ---- the update math ---- */

/* The optimizer of o on count floats (the model's arena layout) in the memory k's kernels work
 * on: slots s[0..2] (kernels/optim.h), gradients g read only (they may be shared), multiplied
 * by h->gscale (1, or 1 / the loss scale). Clipping: clipnorm per tensor of m,
 * global_clipnorm over all of g (the same bits on every replica, as g is), on the unscaled
 * gradients, clipvalue per element; weight decay first, as Keras does. */
void mw_optimizer_apply(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model *m, float *p, float *const s[3], const float *g,
                        size_t count, const mw_optim_hyper *h);
/* A backend's finite op on the summed gradients g (count floats in k's memory): the squared
 * norm summed in double, finite exactly when every element is. */
int mw_grads_finite(const mw_kernels *kt, const mw_kctx *k, const float *g, size_t count);
/* The scalars of the next update, counting it in *opt_step (Keras' iterations): the
 * scheduled rate of step *opt_step, Adam's bias-corrected alpha, the decay. Once per step,
 * however many copies of the state apply it. */
void mw_optimizer_hyper(const mw_train_opts *o, long *opt_step, mw_optim_hyper *h);
/* The learning rate of optimizer step `step` (its schedule's, else learning_rate). */
double mw_optimizer_lr(const mw_train_opts *o, long step);
/* How many slot arenas (m1, m2, m3) the optimizer of o keeps state in (checkpoints). */
int mw_optimizer_slots(const mw_train_opts *o);
/* Fill fresh slots (m1 m2 m3 of count floats, host memory): zeros, or the row's start. */
void mw_optimizer_init_slots(const mw_train_opts *o, float *m1, float *m2, float *m3, size_t count);

#endif
