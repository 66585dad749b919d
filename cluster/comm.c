/* Deadline waits over MPI requests; see comm.h. */
#include "cluster/comm.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common/timer.h"

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

mw_status mw_comm_wait(const mw_wait_ctx *w, MPI_Request *reqs, int n, const int *peers)
{
    double t0 = -1;
    for (unsigned long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mw_mpi_err(rc, w->op);
        if (done)
            return MW_OK;
        if (spin >= yield_after)
            sched_yield();
        if (spin % 256 != 255)
            continue;
        /* Past the first few microseconds, check the clock and let others run. */
        double now = mw_now();
        if (t0 < 0)
            t0 = now;
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

mw_status mw_agree(MPI_Comm comm, mw_status local, int *first_rank)
{
    int me = 0, n = 1;
    if (first_rank)
        *first_rank = -1;
    MW_TRY(check(MPI_Comm_rank(comm, &me), "MPI_Comm_rank"));
    MW_TRY(check(MPI_Comm_size(comm, &n), "MPI_Comm_size"));
    if ((unsigned)local >= MW_STATUS_COUNT)
        local = MW_EINTERNAL;
    int mine = local != MW_OK ? me : n, first = n;
    MW_TRY(check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce"));
    if (first >= n)
        return MW_OK;
    if (first_rank)
        *first_rank = first;

    struct {
        int status;
        char msg[AGREE_MSG];
    } m;
    memset(&m, 0, sizeof m);
    if (me == first) {
        const char *msg = mw_err_msg();
        m.status = (int)local;
        snprintf(m.msg, sizeof m.msg, "%s", *msg ? msg : mw_status_desc(local));
    }
    MW_TRY(check(MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, first, comm), "MPI_Bcast"));
    m.msg[sizeof m.msg - 1] = '\0';
    if (m.status <= (int)MW_OK || m.status >= (int)MW_STATUS_COUNT)
        m.status = (int)MW_EINTERNAL;
    if (me != first || !*mw_err_msg()) {
        mw_err_clear();
        mw_err((mw_status)m.status, "%s", m.msg);
    }
    return (mw_status)m.status;
}

mw_status mw_agree_range(MPI_Comm comm, int v, int *lo, int *hi, const char *what)
{
    int in[2] = {-v, v}, out[2];
    MW_TRY(check(MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, comm), what));
    *lo = -out[0], *hi = out[1];
    return MW_OK;
}
