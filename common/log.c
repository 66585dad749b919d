/* stderr logger; one fprintf per message so ranks' lines do not interleave mid-line, its control
 * bytes escaped (common/strfmt.h). */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strfmt.h"

static mw_log_level level = MW_LOG_INFO;
static int log_rank = 0, log_nranks = 1;

void mw_log_set_level(mw_log_level lvl)
{
    level = lvl;
}

mw_log_level mw_log_get_level(void)
{
    return level;
}

void mw_log_init_from_env(void)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    const char *v = getenv("MW_LOG");
    if (!v)
        return;
    for (int i = 0; i < 4; i++)
        if (strcmp(v, names[i]) == 0)
            level = (mw_log_level)i;
}

void mw_log_set_rank(int rank, int nranks)
{
    log_rank = rank;
    log_nranks = nranks;
}

void mw_log(mw_log_level lvl, const char *fmt, ...)
{
    static const char *tags[] = {"error", "warning", "info", "debug"};
    if (lvl > level)
        return;
    char raw[2048], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    mw_str_controls(msg, sizeof msg, raw); /* no raw control byte reaches the terminal */
    if (log_nranks > 1)
        fprintf(stderr, "mwtrain [rank %d/%d] %s: %s\n", log_rank, log_nranks, tags[lvl], msg);
    else
        fprintf(stderr, "mwtrain %s: %s\n", tags[lvl], msg);
}
