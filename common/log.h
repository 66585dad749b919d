/* Leveled logging to stderr with a rank prefix once the cluster is known.
 * The level comes from mw_log_set_level (the CLI's --verbose/--quiet) or the
 * MW_LOG environment variable (error|warn|info|debug). */
#ifndef MW_COMMON_LOG_H
#define MW_COMMON_LOG_H

typedef enum { MW_LOG_ERROR, MW_LOG_WARN, MW_LOG_INFO, MW_LOG_DEBUG } mw_log_level;

void mw_log_set_level(mw_log_level lvl);
mw_log_level mw_log_get_level(void);
/* Read MW_LOG; an unknown value is ignored. */
void mw_log_init_from_env(void);
/* Prefix messages with "[rank r/n]" when n > 1. */
void mw_log_set_rank(int rank, int nranks);
void mw_log(mw_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define mw_log_error(...) mw_log(MW_LOG_ERROR, __VA_ARGS__)
#define mw_log_warn(...) mw_log(MW_LOG_WARN, __VA_ARGS__)
#define mw_log_info(...) mw_log(MW_LOG_INFO, __VA_ARGS__)
#define mw_log_debug(...) mw_log(MW_LOG_DEBUG, __VA_ARGS__)

#endif
