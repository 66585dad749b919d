/* Keras optimizer configs: the JSON that keras.optimizers.serialize(opt) writes, into the
 * optimizer fields of a run's options (worker/opts.h).
 *
 * Accepted shapes (the optimizer, and a learning_rate that is a schedule, alike):
 *   Keras 3:  {"module": "keras.optimizers", "class_name": "Adam", "config": {...},
 *              "registered_name": null}
 *   Keras 2 / tf.keras:  {"class_name": "Adam", "config": {...}}
 *   a name:   "adam" (Keras' defaults, as keras.optimizers.get takes it)
 * Classes: the optimizer table's (worker/optimizers.h: each row names its Keras class, its own
 * config keys and its defaults), each with weight_decay and one of clipnorm, clipvalue,
 * global_clipnorm; and LossScaleOptimizer around one of them (inner_optimizer, initial_scale: a
 * power of 2, dynamic_growth_steps: the loss_scale_* fields, used under mixed_float16).
 * learning_rate is a number or one of the schedules of worker/schedule.h. Keys Keras writes that
 * change nothing here (name, jit_compile, is_legacy_optimizer, ema_momentum, ...) are accepted;
 * use_ema, loss_scale_factor and gradient_accumulation_steps only at their defaults (off). Anything
 * else is an error naming the key. */
#ifndef MW_WORKER_OPTIMIZER_H
#define MW_WORKER_OPTIMIZER_H

#include <jansson.h>

#include "common/status.h"
#include "worker/opts.h"

/* The entry point for any reader of Keras configs (--optimizer-config, the compile_config
 * "optimizer" of a .keras archive): set o's optimizer fields (optimizer, learning_rate,
 * momentum, beta1, beta2, epsilon, nesterov, amsgrad, centered, rho, initial_accumulator,
 * weight_decay, clipnorm, clipvalue, global_clipnorm, schedule; loss_scale_initial and
 * loss_scale_growth from a LossScaleOptimizer) from j, Keras' defaults for
 * the keys j leaves out. where names the source in messages ("opt.json", "m.keras:
 * compile_config.optimizer"). j is borrowed. On failure MW_ECONFIG (MW_EUNSUPPORTED for a
 * feature mwtrain lacks) "WHERE: config.learning_rate.config.decay_steps: expected a number
 * > 0, got -3", and o's optimizer fields are unchanged. */
mw_status mw_optimizer_from_json(mw_train_opts *o, const json_t *j, const char *where);
/* Largest --optimizer-config file: 1 MiB, as TF_CONFIG (a config with a schedule of
 * MW_SCHED_MAX_BOUNDARIES boundaries takes well under 200 KiB). */
#define MW_OPTIMIZER_MAX_BYTES (1u << 20)

/* Read path (JSON, a regular file of at most MW_OPTIMIZER_MAX_BYTES) and apply it with
 * mw_optimizer_from_json; MW_EIO when it cannot be read or is not a regular file (a FIFO is
 * refused without being opened), MW_ECONFIG "PATH: N bytes; expected at most 1048576 (1 MiB)"
 * for a larger one (nothing is read), MW_ECONFIG "PATH: line L: ..." when it is not JSON. */
mw_status mw_optimizer_load(mw_train_opts *o, const char *path);

/* After the command line is parsed: o's optimizer from --optimizer-config (mw_optimizer_load),
 * else, when no shorthand flag was given and --model is a .keras archive, from its
 * compile_config, else the shorthand completed with Keras' defaults (RMSprop's momentum 0
 * unless --momentum was given, AdamW's weight decay). */
mw_status mw_optimizer_resolve(mw_train_opts *o);

#endif
