/* Deadline waits over MPI requests; see comm.h. */
#include "cluster/comm.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "common/watchdog.h"

static unsigned long yield_after = 4096;

void mw_comm_set_yield_after(unsigned long polls)
{
    yield_after = polls;
}

mw_status mw_mpi_err(int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return mw_err(MW_EMPI, "%s: %s", what, msg);
}

/* A wait that was needed, on the timeline: "wait: <op>". */
static void timeline_wait(const mw_wait_ctx *w, double since)
{
    char name[MW_TIMELINE_NAME];
    snprintf(name, sizeof name, "wait: %s", w->op);
    mw_timeline_span(name, "wait", since);
}

/* The backstop behind the polled deadline: an MPI call that itself does not return (Open MPI
 * blocked writing to a TCP peer whose node is stopped) never reaches the clock check, so the
 * watchdog ends the process a margin (5..30 s) after the deadline instead. */
static double backstop(double timeout)
{
    return timeout + (timeout < 5 ? 5 : timeout > 30 ? 30 : timeout);
}

static mw_status poll_wait(const mw_wait_ctx *w, MPI_Request *reqs, int n, const int *peers,
                           int *guard)
{
    double t0 = -1;
    const double tl0 = mw_timeline_on ? mw_timeline_now() : 0;
    for (unsigned long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mw_mpi_err(rc, w->op);
        if (done) {
            if (mw_timeline_on && spin > 0)
                timeline_wait(w, tl0);
            return MW_OK;
        }
        if (spin >= yield_after)
            sched_yield();
        if (spin % 256 != 255)
            continue;
        /* Past the first few microseconds, check the clock and let others run. */
        double now = mw_now();
        if (t0 < 0) {
            t0 = now;
            if (w->timeout > 0) /* only a wait that took a while pays for the guard */
                *guard = mw_watchdog_arm_if_idle(w->op, backstop(w->timeout));
        }
        if (w->timeout > 0 && now - t0 > w->timeout) {
            int peer = -1;
            for (int i = 0; i < n && peers; i++) {
                int one = 0;
                MPI_Test(&reqs[i], &one, MPI_STATUS_IGNORE);
                if (!one) {
                    peer = peers[i];
                    break;
                }
            }
            char at[48] = "";
            if (w->step >= 0)
                snprintf(at, sizeof at, " at step %ld", w->step);
            if (peer >= 0)
                return mw_err(MW_ETIMEOUT,
                              "collective timeout: %s%s waited %.0f s for rank %d "
                              "(--collective-timeout %.0f); that rank is stopped, dead or "
                              "unreachable",
                              w->op, at, now - t0, peer, w->timeout);
            return mw_err(MW_ETIMEOUT,
                          "collective timeout: %s%s waited %.0f s "
                          "(--collective-timeout %.0f)",
                          w->op, at, now - t0, w->timeout);
        }
    }
}

mw_status mw_comm_wait(const mw_wait_ctx *w, MPI_Request *reqs, int n, const int *peers)
{
    static int wedged = -1; /* MW_FAULT=wedge (common/fault.h): this wait never returns */
    if (wedged < 0)
        wedged = mw_fault_wedged(-1);
    if (wedged && w->timeout > 0) {
        mw_watchdog_arm_if_idle(w->op, backstop(w->timeout));
        fprintf(stderr, "mwtrain: MW_FAULT: wedged in %s\n", w->op);
        fflush(stderr);
        for (;;)
            pause();
    }
    int guard = 0;
    mw_status rc = poll_wait(w, reqs, n, peers, &guard);
    if (guard)
        mw_watchdog_disarm();
    return rc;
}

mw_status mw_comm_bcast(const mw_wait_ctx *w, void *buf, int count, MPI_Datatype type, int root,
                        MPI_Comm comm)
{
    MPI_Request req;
    MW_MPI(MPI_Ibcast(buf, count, type, root, comm, &req), w->op);
    return mw_comm_wait(w, &req, 1, NULL); /* any rank may be the late one */
}

/* ---- agreeing ------------------------------------------------------------------------------ */

/* A message that crosses ranks: the size of common/status.c's message slot. */
#define AGREE_MSG 1024

static mw_status check(int rc, const char *what)
{
    return rc == MPI_SUCCESS ? MW_OK : mw_mpi_err(rc, what);
}

/* The process-wide deadline of waits outside a step (set-up, agreements, shut-down). */
static double agree_timeout = 300.0;

void mw_comm_set_timeout(double seconds)
{
    agree_timeout = seconds;
}

double mw_comm_timeout(void)
{
    return agree_timeout;
}

/* What every rank brings to an agreement, and what the root sends back. */
typedef struct {
    int status;
    int first; /* the verdict: the lowest failing rank, or -1 */
    char msg[AGREE_MSG];
} agree_msg;

/* Root: collect every rank's status and message, each receive polled against the deadline
 * (so the error names the rank that did not arrive), pick the lowest failing rank and send
 * the verdict back to everyone. */
static mw_status agree_root(MPI_Comm comm, int n, agree_msg *v, const mw_wait_ctx *w)
{
    agree_msg *all = calloc((size_t)n, sizeof *all);
    MPI_Request *req = calloc((size_t)n, sizeof *req);
    int *peer = calloc((size_t)n, sizeof *peer);
    mw_status rc = all && req && peer ? MW_OK : mw_err(MW_ENOMEM, "agreement: out of memory");
    for (int r = 1; r < n && rc == MW_OK; r++) {
        peer[r - 1] = r;
        rc = check(
            MPI_Irecv(&all[r], (int)sizeof *all, MPI_BYTE, r, MW_TAG_AGREE, comm, &req[r - 1]),
            w->op);
    }
    if (rc == MW_OK)
        rc = mw_comm_wait(w, req, n - 1, peer);
    all[0] = *v;
    for (int r = 0; r < n && rc == MW_OK; r++)
        if (all[r].status != (int)MW_OK) {
            *v = all[r];
            v->first = r;
            break;
        }
    for (int r = 1; r < n && rc == MW_OK; r++)
        rc = check(MPI_Isend(v, (int)sizeof *v, MPI_BYTE, r, MW_TAG_AGREE, comm, &req[r - 1]),
                   w->op);
    if (rc == MW_OK)
        rc = mw_comm_wait(w, req, n - 1, peer);
    if (rc != MW_OK && all && req && peer)
        return rc; /* requests may still be pending on these: left to the ending job */
    free(all);
    free(req);
    free(peer);
    return rc;
}

mw_status mw_agree(MPI_Comm comm, mw_status local, int *first_rank)
{
    int me = 0, n = 1;
    if (first_rank)
        *first_rank = -1;
    MW_TRY(check(MPI_Comm_rank(comm, &me), "MPI_Comm_rank"));
    MW_TRY(check(MPI_Comm_size(comm, &n), "MPI_Comm_size"));
    if ((unsigned)local >= MW_STATUS_COUNT)
        local = MW_EINTERNAL;
    agree_msg v;
    memset(&v, 0, sizeof v);
    v.status = (int)local;
    v.first = -1;
    if (local != MW_OK) {
        const char *msg = mw_err_msg();
        snprintf(v.msg, sizeof v.msg, "%s", *msg ? msg : mw_status_desc(local));
    }
    if (n > 1 && me == 0) {
        mw_wait_ctx w = {"agreement", -1, agree_timeout};
        MW_TRY(agree_root(comm, n, &v, &w));
    } else if (n > 1) {
        /* The root knows who is missing: wait longer for it than it waits for anyone, so
         * its message (naming the rank) is the one that ends the job. */
        mw_wait_ctx w = {"agreement", -1, agree_timeout > 0 ? agree_timeout * 1.2 + 5 : 0};
        /* on the heap: after a timeout the requests stay pending and the buffers with them */
        agree_msg *io = malloc(2 * sizeof *io);
        MPI_Request req[2];
        int peer[2] = {0, 0};
        if (!io)
            return mw_err(MW_ENOMEM, "agreement: out of memory");
        io[0] = v;
        MW_TRY(check(MPI_Isend(&io[0], (int)sizeof *io, MPI_BYTE, 0, MW_TAG_AGREE, comm, &req[0]),
                     w.op));
        MW_TRY(check(MPI_Irecv(&io[1], (int)sizeof *io, MPI_BYTE, 0, MW_TAG_AGREE, comm, &req[1]),
                     w.op));
        MW_TRY(mw_comm_wait(&w, req, 2, peer));
        v = io[1];
        free(io);
    } else if (local != MW_OK) {
        v.first = 0;
    }
    if (v.first < 0)
        return MW_OK;
    if (first_rank)
        *first_rank = v.first;
    v.msg[sizeof v.msg - 1] = '\0';
    if (v.status <= (int)MW_OK || v.status >= (int)MW_STATUS_COUNT)
        v.status = (int)MW_EINTERNAL;
    if (me != v.first || !*mw_err_msg()) {
        mw_err_clear();
        mw_err((mw_status)v.status, "%s", v.msg);
    }
    return (mw_status)v.status;
}

mw_status mw_agree_range(MPI_Comm comm, int v, int *lo, int *hi, const char *what)
{
    int io[2] = {-v, v};
    mw_wait_ctx w = {what, -1, agree_timeout};
    MW_TRY(mw_comm_allreduce(&w, io, 2, MPI_INT, MPI_MAX, comm));
    *lo = -io[0], *hi = io[1];
    return MW_OK;
}

mw_status mw_comm_allreduce(const mw_wait_ctx *w, void *buf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm)
{
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, comm, &req), w->op);
    return mw_comm_wait(w, &req, 1, NULL);
}

mw_status mw_comm_allgather(const mw_wait_ctx *w, const void *mine, void *all, int count,
                            MPI_Datatype type, MPI_Comm comm)
{
    MPI_Request req;
    MW_MPI(MPI_Iallgather(mine, count, type, all, count, type, comm, &req), w->op);
    return mw_comm_wait(w, &req, 1, NULL);
}

mw_status mw_comm_gather(const mw_wait_ctx *w, const void *mine, void *all, int count,
                         MPI_Datatype type, int root, MPI_Comm comm)
{
    MPI_Request req;
    MW_MPI(MPI_Igather(mine, count, type, all, count, type, root, comm, &req), w->op);
    return mw_comm_wait(w, &req, 1, NULL);
}

mw_status mw_comm_barrier(const mw_wait_ctx *w, MPI_Comm comm)
{
    MPI_Request req;
    MW_MPI(MPI_Ibarrier(comm, &req), w->op);
    return mw_comm_wait(w, &req, 1, NULL);
}
