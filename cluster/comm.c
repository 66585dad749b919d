/* Deadline waits over MPI requests; see comm.h. */
#include "cluster/comm.h"

#include <sched.h>
#include <stdio.h>

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
            return mw_err(MW_ETIMEOUT, "collective timeout: %s%s waited %.0f s "
                          "(--collective-timeout %.0f)", w->op, at, now - t0, w->timeout);
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
