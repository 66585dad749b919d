/* Reading Keras' serialized configs (optimizers, schedules, losses, metrics): the checks
 * every reader makes, each message naming the source and the key by its path in the JSON
 * ("opt.json: config.learning_rate: expected a number > 0, got -3"). MW_ECONFIG. */
#ifndef MW_WORKER_KERAS_KCONFIG_H
#define MW_WORKER_KERAS_KCONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"

/* Where a value lives, for messages: the source and the key path. */
typedef struct {
    const char *where;
    char path[160];
} mw_kc_loc;

/* Range flags of mw_kc_num. */
enum { LO_OPEN = 1, HI_OPEN = 2, NULL_OK = 4 };

/* "WHERE: PATH.KEY: message" (key NULL: the path alone). */
mw_status mw_kc_bad(const mw_kc_loc *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* dst: l one key deeper. */
void mw_kc_sub(mw_kc_loc *dst, const mw_kc_loc *l, const char *key);
/* A JSON value for messages, short (buf of len bytes). */
const char *mw_kc_show(const json_t *v, char *buf, size_t len);
/* cfg[key] as a number in [lo, hi] (ends excluded by LO_OPEN / HI_OPEN); absent: *out stays;
 * null: *out = 0 with NULL_OK (the option off), else an error. */
mw_status mw_kc_num(const mw_kc_loc *l, const json_t *cfg, const char *key, double lo, double hi,
                    unsigned flags, double *out);
/* cfg[key] as true or false; absent: *out stays. */
mw_status mw_kc_bool(const mw_kc_loc *l, const json_t *cfg, const char *key, int *out);
/* Every key of cfg is in one of the NULL-terminated lists: a (common to the family, summed
 * up as common in messages) or b (the class's own). */
mw_status mw_kc_known(const mw_kc_loc *l, const json_t *cfg, const char *cls, const char *const *a,
                      const char *const *b, const char *common);
/* The {"module", "class_name", "config", "registered_name"} wrapper: its class name and
 * config (NULL when absent). module, when given and not null, must be want_module. */
mw_status mw_kc_unwrap(const mw_kc_loc *l, const json_t *j, const char *want_module,
                       const char **cls, const json_t **cfg);

#endif
