/* Status table and the thread-local first-error message, its control bytes escaped. */
#include "common/status.h"

#include <stdio.h>

#include "common/strfmt.h"

static _Thread_local char err_msg[2048]; /* the unknown-class message lists every class read */
static _Thread_local mw_status err_status = MW_OK;

static const struct {
    const char *name;
    int code;
    const char *desc;
} table[] = {
#define MW_X_ROW(name, code, desc) {#name, code, desc},
    MW_STATUS_TABLE(MW_X_ROW)
#undef MW_X_ROW
};

const char *mw_status_str(mw_status s)
{
    if ((unsigned)s >= MW_STATUS_COUNT)
        return "MW_E?";
    return table[s].name;
}

const char *mw_status_desc(mw_status s)
{
    if ((unsigned)s >= MW_STATUS_COUNT)
        return "unknown status";
    return table[s].desc;
}

int mw_status_exit_code(mw_status s)
{
    if ((unsigned)s >= MW_STATUS_COUNT)
        return 1;
    return table[s].code;
}

mw_status mw_verr(mw_status s, const char *fmt, va_list ap)
{
    if (err_status == MW_OK && s != MW_OK) {
        char raw[sizeof err_msg];
        vsnprintf(raw, sizeof raw, fmt, ap);
        mw_str_controls(err_msg, sizeof err_msg, raw); /* whatever it quotes: no raw ESC */
        err_status = s;
    }
    return s;
}

mw_status mw_verr_at(mw_status s, const char *where, const char *fmt, va_list ap)
{
    if (err_status != MW_OK || s == MW_OK)
        return s;
    char msg[sizeof err_msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (where && *where)
        return mw_err(s, "%s: %s", where, msg);
    return mw_err(s, "%s", msg);
}

mw_status mw_err(mw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mw_verr(s, fmt, ap);
    va_end(ap);
    return s;
}

const char *mw_err_msg(void)
{
    return err_status == MW_OK ? "" : err_msg;
}

mw_status mw_err_status(void)
{
    return err_status;
}

void mw_err_clear(void)
{
    err_status = MW_OK;
    err_msg[0] = '\0';
}
