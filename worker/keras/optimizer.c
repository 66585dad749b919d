/* Keras optimizer and learning-rate schedule configs into a run's options (see optimizer.h).
 * Every value is checked against the range Keras itself enforces or that makes the rule
 * meaningful, and every message names the key by its path in the JSON. */
#include "worker/keras/optimizer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fs.h"
#include "worker/keras/kconfig.h"
#include "worker/keras/keras_archive.h"
#include "worker/optimizers.h"

/* ---- schedules ------------------------------------------------------------------------- */

static const char *const sched_common[] = {"name", NULL};

static mw_status required(const mw_kc_loc *l, const json_t *cfg, const char *cls,
                          const char *const *keys)
{
    for (const char *const *k = keys; *k; k++)
        if (!cfg || !json_object_get(cfg, *k))
            return mw_kc_bad(l, *k, "missing (%s requires it)", cls);
    return MW_OK;
}

static mw_status piecewise(const mw_kc_loc *l, const json_t *cfg, mw_schedule *s)
{
    const json_t *b = json_object_get(cfg, "boundaries"), *v = json_object_get(cfg, "values");
    char buf[64];
    if (!json_is_array(b) || json_array_size(b) < 1 || json_array_size(b) > MW_SCHED_MAX_BOUNDARIES)
        return mw_kc_bad(l, "boundaries", "expected a list of 1 to %d step numbers, got %s",
                         MW_SCHED_MAX_BOUNDARIES, mw_kc_show(b, buf, sizeof buf));
    if (!json_is_array(v) || json_array_size(v) != json_array_size(b) + 1)
        return mw_kc_bad(
            l, "values", "expected a list of %zu rates (one more than the %zu boundaries), got %s",
            json_array_size(b) + 1, json_array_size(b), mw_kc_show(v, buf, sizeof buf));
    s->nboundaries = (int)json_array_size(b);
    for (size_t i = 0; i <= json_array_size(b); i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_number(x) || !(json_number_value(x) >= 0) || !isfinite(json_number_value(x)))
            return mw_kc_bad(l, "values", "entry %zu: expected a rate >= 0, got %s", i,
                             mw_kc_show(x, buf, sizeof buf));
        s->values[i] = json_number_value(x);
        if (i == json_array_size(b))
            break;
        x = json_array_get(b, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return mw_kc_bad(l, "boundaries", "entry %zu: expected a step number, got %s", i,
                             mw_kc_show(x, buf, sizeof buf));
        s->boundaries[i] = json_number_value(x);
        if (i > 0 && !(s->boundaries[i] > s->boundaries[i - 1]))
            return mw_kc_bad(l, "boundaries",
                             "expected increasing step numbers, but entry %zu (%g) "
                             "is not above entry %zu (%g)",
                             i, s->boundaries[i], i - 1, s->boundaries[i - 1]);
    }
    return MW_OK;
}

static const struct {
    const char *cls;
    mw_sched_kind kind;
    const char *req[4];
    const char *opt[5];
} sched_classes[] = {
    {"ExponentialDecay",
     MW_SCHED_EXPONENTIAL,
     {"initial_learning_rate", "decay_steps", "decay_rate", NULL},
     {"staircase", NULL}},
    {"PiecewiseConstantDecay", MW_SCHED_PIECEWISE, {"boundaries", "values", NULL}, {NULL}},
    {"PolynomialDecay",
     MW_SCHED_POLYNOMIAL,
     {"initial_learning_rate", "decay_steps", NULL},
     {"end_learning_rate", "power", "cycle", NULL}},
    {"InverseTimeDecay",
     MW_SCHED_INVERSE_TIME,
     {"initial_learning_rate", "decay_steps", "decay_rate", NULL},
     {"staircase", NULL}},
    {"CosineDecay",
     MW_SCHED_COSINE,
     {"initial_learning_rate", "decay_steps", NULL},
     {"alpha", "warmup_target", "warmup_steps", NULL}},
    {"CosineDecayRestarts",
     MW_SCHED_COSINE_RESTARTS,
     {"initial_learning_rate", "first_decay_steps", NULL},
     {"t_mul", "m_mul", "alpha", NULL}},
};
#define NSCHED (sizeof sched_classes / sizeof *sched_classes)

/* The numbers of a schedule's config, by kind (all optional fields at Keras' defaults). */
static mw_status sched_values(const mw_kc_loc *l, const json_t *cfg, mw_schedule *s)
{
    const double inf = INFINITY;
    MW_TRY(mw_kc_num(l, cfg, "initial_learning_rate", 0, inf, 0, &s->initial));
    MW_TRY(mw_kc_num(l, cfg, "decay_steps", 0, inf, LO_OPEN, &s->decay_steps));
    MW_TRY(mw_kc_num(l, cfg, "first_decay_steps", 0, inf, LO_OPEN, &s->decay_steps));
    MW_TRY(mw_kc_num(l, cfg, "decay_rate", 0, inf, 0, &s->decay_rate));
    MW_TRY(mw_kc_bool(l, cfg, "staircase", &s->staircase));
    MW_TRY(mw_kc_num(l, cfg, "end_learning_rate", 0, inf, 0, &s->end_lr));
    MW_TRY(mw_kc_num(l, cfg, "power", 0, inf, 0, &s->power));
    MW_TRY(mw_kc_bool(l, cfg, "cycle", &s->cycle));
    MW_TRY(mw_kc_num(l, cfg, "alpha", 0, 1, 0, &s->alpha));
    const json_t *wt = json_object_get(cfg, "warmup_target");
    s->warmup = wt && !json_is_null(wt);
    MW_TRY(mw_kc_num(l, cfg, "warmup_target", 0, inf, NULL_OK, &s->warmup_target));
    MW_TRY(mw_kc_num(l, cfg, "warmup_steps", 0, inf, 0, &s->warmup_steps));
    MW_TRY(mw_kc_num(l, cfg, "t_mul", 0, inf, LO_OPEN, &s->t_mul));
    MW_TRY(mw_kc_num(l, cfg, "m_mul", 0, inf, 0, &s->m_mul));
    if (s->kind == MW_SCHED_PIECEWISE)
        MW_TRY(piecewise(l, cfg, s));
    return MW_OK;
}

static mw_status schedule_from_json(const mw_kc_loc *l, const json_t *j, mw_schedule *out)
{
    const char *cls;
    const json_t *cfg;
    MW_TRY(mw_kc_unwrap(l, j, "keras.optimizers.schedules", &cls, &cfg));
    size_t i = 0;
    while (i < NSCHED && strcmp(sched_classes[i].cls, cls) != 0)
        i++;
    if (i == NSCHED)
        return mw_kc_bad(
            l, "class_name",
            "unknown schedule '%s' (expected ExponentialDecay, PiecewiseConstantDecay, "
            "PolynomialDecay, InverseTimeDecay, CosineDecay or CosineDecayRestarts)",
            cls);
    mw_kc_loc c;
    mw_kc_sub(&c, l, "config");
    MW_TRY(required(&c, cfg, cls, sched_classes[i].req));
    const char *keys[12];
    size_t n = 0;
    for (const char *const *k = sched_classes[i].req; *k; k++)
        keys[n++] = *k;
    for (const char *const *k = sched_classes[i].opt; *k; k++)
        keys[n++] = *k;
    keys[n] = NULL;
    MW_TRY(mw_kc_known(&c, cfg, cls, sched_common, keys, "name"));
    mw_schedule s = {
        .kind = sched_classes[i].kind, .end_lr = 1e-4, .power = 1.0, .t_mul = 2.0, .m_mul = 1.0};
    MW_TRY(sched_values(&c, cfg, &s));
    *out = s;
    return MW_OK;
}

/* ---- optimizers ------------------------------------------------------------------------ */

static const char *const opt_common[] = {"name",
                                         "learning_rate",
                                         "weight_decay",
                                         "clipnorm",
                                         "clipvalue",
                                         "global_clipnorm",
                                         "use_ema",
                                         "ema_momentum",
                                         "ema_overwrite_frequency",
                                         "loss_scale_factor",
                                         "gradient_accumulation_steps",
                                         "jit_compile",
                                         "is_legacy_optimizer",
                                         "decay",
                                         NULL};

/* Keras' defaults for a class: what its constructor takes when a key is left out (the
 * optimizer table's row, worker/optimizers.h, where they differ between classes). */
static void class_defaults(mw_train_opts *o, mw_optimizer kind)
{
    const mw_optimizer_row *r = mw_optimizer_row_of(kind);
    o->optimizer = kind;
    o->learning_rate = r->lr;
    o->momentum = 0.0;
    o->beta1 = 0.9, o->beta2 = r->beta2 > 0 ? r->beta2 : 0.999, o->epsilon = 1e-7;
    o->nesterov = o->amsgrad = o->centered = 0;
    o->rho = 0.9;
    o->initial_accumulator = 0.1;
    o->weight_decay = r->weight_decay;
    o->clipnorm = o->clipvalue = o->global_clipnorm = 0.0;
    memset(&o->schedule, 0, sizeof o->schedule);
}

/* Keys Keras writes that must stay at their "off" values here. */
static mw_status unsupported(const mw_kc_loc *l, const json_t *cfg)
{
    static const char *const off[] = {"use_ema", "loss_scale_factor",
                                      "gradient_accumulation_steps"};
    char buf[64];
    for (size_t i = 0; i < 3; i++) {
        const json_t *v = json_object_get(cfg, off[i]);
        if (v && !json_is_null(v) && !json_is_false(v))
            return mw_err(MW_EUNSUPPORTED, "%s: %s%s%s: %s is not supported (expected %s)",
                          l->where, l->path, ".", off[i], mw_kc_show(v, buf, sizeof buf),
                          i == 0 ? "false" : "null");
    }
    const json_t *d = json_object_get(cfg, "decay");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0))
        return mw_kc_bad(l, "decay",
                         "no longer supported by Keras (expected 0 or null; use a "
                         "learning-rate schedule), got %s",
                         mw_kc_show(d, buf, sizeof buf));
    return MW_OK;
}

static mw_status learning_rate(const mw_kc_loc *l, const json_t *cfg, mw_train_opts *o)
{
    const json_t *v = json_object_get(cfg, "learning_rate");
    if (json_is_object(v)) {
        mw_kc_loc s;
        mw_kc_sub(&s, l, "learning_rate");
        MW_TRY(schedule_from_json(&s, v, &o->schedule));
        o->learning_rate = mw_schedule_rate(&o->schedule, 0.0, 0);
        return MW_OK;
    }
    return mw_kc_num(l, cfg, "learning_rate", 0, INFINITY, LO_OPEN, &o->learning_rate);
}

static mw_status opt_values(const mw_kc_loc *l, const json_t *cfg, mw_train_opts *o)
{
    const double inf = INFINITY;
    MW_TRY(unsupported(l, cfg));
    MW_TRY(learning_rate(l, cfg, o));
    MW_TRY(mw_kc_num(l, cfg, "weight_decay", 0, inf, NULL_OK, &o->weight_decay));
    MW_TRY(mw_kc_num(l, cfg, "clipnorm", 0, inf, LO_OPEN | NULL_OK, &o->clipnorm));
    MW_TRY(mw_kc_num(l, cfg, "clipvalue", 0, inf, LO_OPEN | NULL_OK, &o->clipvalue));
    MW_TRY(mw_kc_num(l, cfg, "global_clipnorm", 0, inf, LO_OPEN | NULL_OK, &o->global_clipnorm));
    if ((o->clipnorm > 0) + (o->clipvalue > 0) + (o->global_clipnorm > 0) > 1)
        return mw_kc_bad(l, NULL,
                         "only one of clipnorm, clipvalue and global_clipnorm may be set "
                         "(as in Keras)");
    MW_TRY(mw_kc_num(l, cfg, "momentum", 0, 1, 0, &o->momentum));
    MW_TRY(mw_kc_bool(l, cfg, "nesterov", &o->nesterov));
    MW_TRY(mw_kc_num(l, cfg, "beta_1", 0, 1, HI_OPEN, &o->beta1));
    MW_TRY(mw_kc_num(l, cfg, "beta_2", 0, 1, HI_OPEN, &o->beta2));
    MW_TRY(mw_kc_num(l, cfg, "epsilon", 0, inf, 0, &o->epsilon));
    MW_TRY(mw_kc_bool(l, cfg, "amsgrad", &o->amsgrad));
    MW_TRY(mw_kc_num(l, cfg, "rho", 0, 1, HI_OPEN, &o->rho));
    MW_TRY(mw_kc_bool(l, cfg, "centered", &o->centered));
    MW_TRY(mw_kc_num(l, cfg, "initial_accumulator_value", 0, inf, 0, &o->initial_accumulator));
    return MW_OK;
}

static mw_status from_json(mw_train_opts *o, const json_t *j, const mw_kc_loc *lp, int outer);

/* Keras' LossScaleOptimizer (mixed_float16's dynamic loss scaling) around one of the classes
 * above: its initial_scale (a power of 2 here, so unscaling is exact) and
 * dynamic_growth_steps into t, the inner optimizer's fields as any optimizer's. */
static mw_status loss_scale_optimizer(mw_train_opts *t, const mw_kc_loc *l, const json_t *cfg)
{
    static const char *const own[] = {"inner_optimizer", "initial_scale", "dynamic_growth_steps",
                                      "dynamic", NULL};
    MW_TRY(mw_kc_known(l, cfg, "LossScaleOptimizer", opt_common, own,
                       "name, and the base optimizer's keys at their defaults"));
    MW_TRY(unsupported(l, cfg));
    double init = 32768.0, growth = 2000.0;
    int dynamic = 1, e;
    MW_TRY(mw_kc_num(l, cfg, "initial_scale", MW_LOSS_SCALE_MIN, MW_LOSS_SCALE_MAX, 0, &init));
    if (frexp(init, &e) != 0.5)
        return mw_kc_bad(l, "initial_scale",
                         "expected a power of 2 (2**15 is Keras' default), got %g", init);
    MW_TRY(mw_kc_num(l, cfg, "dynamic_growth_steps", 1, MW_LOSS_SCALE_MAX_GROWTH, 0, &growth));
    if (growth != floor(growth))
        return mw_kc_bad(l, "dynamic_growth_steps", "expected a whole number of steps, got %g",
                         growth);
    MW_TRY(mw_kc_bool(l, cfg, "dynamic", &dynamic));
    if (!dynamic)
        return mw_kc_bad(l, "dynamic", "expected true (Keras 3 only scales dynamically)");
    const json_t *inner = json_object_get(cfg, "inner_optimizer");
    if (!inner)
        return mw_kc_bad(l, "inner_optimizer", "missing (expected the wrapped optimizer's config)");
    mw_kc_loc c;
    mw_kc_sub(&c, l, "inner_optimizer");
    MW_TRY(from_json(t, inner, &c, 0));
    t->loss_scale_initial = init;
    t->loss_scale_growth = (long)growth;
    return MW_OK;
}

mw_status mw_optimizer_from_json(mw_train_opts *o, const json_t *j, const char *where)
{
    mw_kc_loc l = {.where = where, .path = ""};
    return from_json(o, j, &l, 1);
}

/* The optimizer j at lp into o; outer: a LossScaleOptimizer may wrap it. */
static mw_status from_json(mw_train_opts *o, const json_t *j, const mw_kc_loc *lp, int outer)
{
    const mw_kc_loc l = *lp;
    const char *cls;
    const json_t *cfg = NULL;
    if (json_is_string(j))
        cls = json_string_value(j);
    else
        MW_TRY(mw_kc_unwrap(&l, j, "keras.optimizers", &cls, &cfg));
    if (outer && !strcmp(cls, "LossScaleOptimizer")) {
        if (!cfg)
            return mw_kc_bad(&l, NULL, "LossScaleOptimizer needs its config (the inner optimizer)");
        mw_train_opts t = *o;
        mw_kc_loc c;
        mw_kc_sub(&c, &l, "config");
        MW_TRY(loss_scale_optimizer(&t, &c, cfg));
        *o = t;
        return MW_OK;
    }
    const int k = mw_optimizer_find(cls, 1);
    if (k < 0)
        return mw_kc_bad(&l, json_is_string(j) ? NULL : "class_name",
                         "unknown optimizer '%s' (expected %s%s)", cls, mw_optimizer_list(1),
                         outer ? ", or a LossScaleOptimizer around one" : "");
    const mw_optimizer_row *row = mw_optimizer_row_of((mw_optimizer)k);
    mw_train_opts t = *o;
    class_defaults(&t, (mw_optimizer)k);
    if (cfg) {
        mw_kc_loc c;
        mw_kc_sub(&c, &l, "config");
        MW_TRY(mw_kc_known(&c, cfg, row->keras, opt_common, row->keys,
                           "learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm, "
                           "name, ..."));
        MW_TRY(opt_values(&c, cfg, &t));
    }
    *o = t;
    return MW_OK;
}

mw_status mw_optimizer_load(mw_train_opts *o, const char *path)
{
    char *text = NULL;
    size_t n = 0;
    /* a regular file, never blocking, its size checked before it is read (common/fs.h) */
    MW_TRY(mw_fs_read_input(path, "the JSON of keras.optimizers.serialize", MW_OPTIMIZER_MAX_BYTES,
                            MW_ECONFIG, &text, &n));
    json_error_t e;
    json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    free(text);
    if (!j)
        return mw_err(MW_ECONFIG,
                      "%s: line %d: %s (expected the JSON of "
                      "keras.optimizers.serialize)",
                      path, e.line, e.text);
    mw_status rc = mw_optimizer_from_json(o, j, path);
    json_decref(j);
    return rc;
}

/* The optimizer of a .keras archive's compile_config, when it has one. */
static mw_status archive_optimizer(mw_train_opts *o)
{
    json_t *j = NULL;
    MW_TRY(mw_keras_archive_compiled(o->model_path, "optimizer", &j));
    if (!j)
        return MW_OK;
    char where[600];
    snprintf(where, sizeof where, "%s: config.json: compile_config.optimizer", o->model_path);
    mw_status rc = mw_optimizer_from_json(o, j, where);
    json_decref(j);
    return rc;
}

mw_status mw_optimizer_resolve(mw_train_opts *o)
{
    if (o->optimizer_config)
        return mw_optimizer_load(o, o->optimizer_config);
    if (!o->optimizer_given && o->model_path && mw_keras_archive_is(o->model_path))
        return archive_optimizer(o);
    /* --momentum's default 0.9 is SGD's; another optimizer with a momentum (RMSprop) takes
     * Keras' 0 */
    const mw_optimizer_row *row = mw_optimizer_row_of(o->optimizer);
    for (int i = 0; i < 6 && row->keys[i]; i++)
        if (!strcmp(row->keys[i], "momentum") && o->optimizer != MW_OPT_SGD && !o->momentum_given)
            o->momentum = 0.0;
    o->weight_decay = row->weight_decay; /* AdamW's 0.004 */
    return MW_OK;
}
