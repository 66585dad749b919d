/* Test-only fault injection; see fault.h. */
#include "common/fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int env_rank(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

void mw_fault_point(const char *point, int rank)
{
    const char *f = getenv("MW_FAULT");
    if (!f || (strncmp(f, "stop:", 5) != 0 && strncmp(f, "hold:", 5) != 0))
        return;
    const char *p = f + 5, *colon = strchr(p, ':');
    if (!colon || (size_t)(colon - p) != strlen(point) || strncmp(p, point, strlen(point)) != 0)
        return;
    if (atoi(colon + 1) != (rank < 0 ? env_rank() : rank))
        return;
    const int hold = f[0] == 'h';
    fprintf(stderr, "mwtrain: MW_FAULT: %s at '%s'\n", hold ? "holding" : "stopping", point);
    fflush(stderr);
    while (hold)
        pause(); /* until a signal's handler ends the process */
    raise(SIGSTOP);
}

void mw_fault_slow(int rank)
{
    static int parsed, slow_rank = -1;
    static long ms;
    if (!parsed) {
        parsed = 1;
        const char *f = getenv("MW_FAULT");
        if (f && sscanf(f, "slow:%d:%ld", &slow_rank, &ms) != 2)
            slow_rank = -1;
    }
    if (rank != slow_rank || ms <= 0)
        return;
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

int mw_fault_wedged(int rank)
{
    const char *f = getenv("MW_FAULT");
    if (!f || strncmp(f, "wedge:", 6) != 0)
        return 0;
    return !strcmp(f + 6, "all") || atoi(f + 6) == (rank < 0 ? env_rank() : rank);
}

mw_status mw_fault_status(void)
{
    const char *f = getenv("MW_FAULT");
    if (!f || strncmp(f, "status:", 7) != 0)
        return MW_OK;
    for (int s = 1; s < MW_STATUS_COUNT; s++)
        if (!strcmp(f + 7, mw_status_str((mw_status)s)))
            return mw_err((mw_status)s, "MW_FAULT=%s: %s injected (exit %d)", f,
                          mw_status_desc((mw_status)s), mw_status_exit_code((mw_status)s));
    return mw_err(MW_EINVAL, "MW_FAULT=%s: expected status:MW_E... (a name of common/status.h)", f);
}
