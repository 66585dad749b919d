/* Status codes, the first-error message, and the check macros.
 *
 * Every fallible function returns mw_status. mw_err() records a message in a
 * thread-local slot; the first one wins, so the message that reaches the user
 * is the root cause, not the last frame that noticed it. Each status maps to a
 * process exit code (see the table): configuration errors are not worth a
 * restart, MPI failures and timeouts are (>= 128), so schedulers can tell them
 * apart. The table is the one list of exit codes: `mwtrain help` prints it, and
 * tests/check_exit_codes.py holds docs/commands.md's table to it (130 is no
 * status: it is 128 + SIGINT, common/preempt.h). MW_EPREEMPTED is not a failure but the agreed end
 * of a preempted run (a signal, common/preempt.h): a restart with --resume continues it. */
#ifndef MW_COMMON_STATUS_H
#define MW_COMMON_STATUS_H

#include <stdarg.h>

/* X(name, exit code, description) */
#define MW_STATUS_TABLE(X)                                                                         \
    X(MW_OK, 0, "success")                                                                         \
    X(MW_EINVAL, 2, "invalid argument")                                                            \
    X(MW_ECONFIG, 2, "configuration error")                                                        \
    X(MW_EDATA, 3, "bad data")                                                                     \
    X(MW_EMODEL, 2, "bad model")                                                                   \
    X(MW_EUNSUPPORTED, 2, "not supported")                                                         \
    X(MW_EIO, 4, "I/O error")                                                                      \
    X(MW_ECKPT, 5, "bad checkpoint")                                                               \
    X(MW_ENOMEM, 6, "out of memory")                                                               \
    X(MW_EDEVICE, 7, "device error")                                                               \
    X(MW_EDIVERGED, 8, "diverged: a non-finite loss or weights")                                   \
    X(MW_EINTERNAL, 1, "internal error")                                                           \
    X(MW_EMPI, 129, "MPI error")                                                                   \
    X(MW_ETIMEOUT, 131, "timeout")                                                                 \
    X(MW_EPREEMPTED, 133, "preempted: the checkpoint of the step reached is saved")

typedef enum {
#define MW_X_ENUM(name, code, desc) name,
    MW_STATUS_TABLE(MW_X_ENUM)
#undef MW_X_ENUM
        MW_STATUS_COUNT
} mw_status;

/* Name of the code ("MW_EDATA"); never NULL. */
const char *mw_status_str(mw_status s);
/* One-line description ("bad data"); never NULL. */
const char *mw_status_desc(mw_status s);
/* Process exit code for a status: 0, 1-7 (do not retry), >= 128 (retry). */
int mw_status_exit_code(mw_status s);

/* Record "fmt..." as this thread's error message unless one is already
 * recorded, and return s. */
mw_status mw_err(mw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
mw_status mw_verr(mw_status s, const char *fmt, va_list ap);
/* The same message behind "WHERE: " (where NULL or "": none), for the readers that name the
 * file, field or layer before every message they make. */
mw_status mw_verr_at(mw_status s, const char *where, const char *fmt, va_list ap);
/* The recorded message, or "" when none. Borrowed; valid until mw_err_clear. */
const char *mw_err_msg(void);
/* The status recorded with the message (MW_OK when none). */
mw_status mw_err_status(void);
void mw_err_clear(void);

#define MW_TRY(expr)                                                                               \
    do {                                                                                           \
        mw_status mw_try_rc_ = (expr);                                                             \
        if (mw_try_rc_ != MW_OK)                                                                   \
            return mw_try_rc_;                                                                     \
    } while (0)

#define MW_TRY_GOTO(expr, rc, label)                                                               \
    do {                                                                                           \
        (rc) = (expr);                                                                             \
        if ((rc) != MW_OK)                                                                         \
            goto label;                                                                            \
    } while (0)

#endif
