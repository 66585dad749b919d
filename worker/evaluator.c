/* The evaluator task and its end of the protocol with the chief; see evaluator.h. */
#include "worker/evaluator.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster/comm.h"
#include "common/fault.h"
#include "common/log.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_pack.h"
#include "worker/chief.h"
#include "worker/session.h"
#include "worker/summary.h"

mw_status mw_evaluator_agree_setup(const mw_topology *topo, mw_status mine)
{
    return mw_agree(topo->world, mine, NULL);
}

mw_status mw_evaluator_agree_start(const mw_topology *topo, mw_status mine)
{
    return mw_agree(topo->world, mine, NULL);
}

/* Receive one message from the chief: *number (-1: training has finished) and the bytes
 * (*buf, owned by the caller). The header may take as long as the chief's epochs do (a
 * stopped chief ends the job through the other trainers' timeouts); the data follows it at
 * once, so that wait is under the deadline. */
static mw_status receive(const mw_topology *topo, double timeout, long *number, char **buf,
                         long *nbytes)
{
    long hdr[2];
    if (MPI_Recv(hdr, 2, MPI_LONG, 0, MW_EV_TAG_HDR, topo->world, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return mw_err(MW_EMPI, "evaluator: receiving from the chief failed");
    if (!(*buf = malloc(hdr[1] > 0 ? (size_t)hdr[1] : 1)))
        return mw_err(MW_ENOMEM, "evaluator: out of memory");
    MPI_Request req;
    if (MPI_Irecv(*buf, (int)hdr[1], MPI_BYTE, 0, MW_EV_TAG_DATA, topo->world, &req) != MPI_SUCCESS)
        return mw_err(MW_EMPI, "evaluator: receiving from the chief failed");
    mw_wait_ctx w = {"evaluator: receiving a checkpoint", -1, timeout};
    int chief = 0;
    mw_status rc = mw_comm_wait(&w, &req, 1, &chief);
    if (rc != MW_OK) {
        *buf = NULL; /* the receive may still land in it: left to the ending job */
        return rc;
    }
    *number = hdr[0], *nbytes = hdr[1];
    return MW_OK;
}

/* Evaluate checkpoint number (its bytes), print the line, write the eval summaries. */
static mw_status evaluate_one(mw_session *s, mw_summary *sum, long number, const char *buf,
                              long nbytes)
{
    char name[64];
    snprintf(name, sizeof name, "ckpt-%ld", number);
    mw_ckpt c;
    mw_ckpt_init(&c);
    mw_status rc = mw_ckpt_read_buffer(&c, buf, (size_t)nbytes, name);
    if (rc == MW_OK)
        rc = mw_ckpt_check_finite(&s->model, &c, name);
    if (rc == MW_OK)
        rc = mw_session_apply(s, &c, name, number, 1);
    mw_ckpt_free(&c);
    double loss = 0, metric[MW_METRICS_MAX];
    MW_TRY(rc);
    MW_TRY(mw_session_evaluate(s, &loss, metric));
    char te[160];
    mw_session_metric_text(s, te, sizeof te, "Test ", metric, 0);
    printf("Evaluator: %s (epoch %d, step %ld), Test Loss: %.4f, %s\n", name, s->start_epoch,
           s->global_step, loss, te);
    fflush(stdout);
    if (!s->o->summary_dir[0])
        return MW_OK;
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    char keys[MW_METRICS_MAX][32];
    const char *names[1 + MW_METRICS_MAX] = {"eval/loss"};
    double v[1 + MW_METRICS_MAX] = {loss};
    for (int i = 0; i < ml.n; i++) {
        snprintf(keys[i], sizeof keys[i], "eval/%s", mw_metric_key(ml.kind[i]));
        names[1 + i] = keys[i], v[1 + i] = metric[i];
    }
    for (int i = 0; i < 1 + ml.n; i++)
        MW_TRY(mw_summary_scalar(sum, names[i], s->global_step, v[i]));
    MW_TRY(mw_summary_row(sum, s->global_step, s->start_epoch, names, v, 1 + ml.n));
    return mw_summary_flush(sum);
}

mw_status mw_evaluator_run(const mw_train_opts *o, const mw_topology *topo, int *mid_run)
{
    mw_session s;
    mw_session_init(&s);
    mw_summary sum;
    mw_summary_init(&sum);
    /* --resume without --model: the checkpoint's model, on every task (the evaluator too) */
    mw_status rc = o->resume ? mw_chief_fetch_model(&s, o, topo->world) : MW_OK;
    if (rc == MW_OK)
        rc = mw_session_open(&s, o, topo, MW_USE_EVALUATOR);
    if (rc == MW_OK && o->summary_dir[0]) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/eval", o->summary_dir);
        rc = mw_summary_open(&sum, dir, o->resume);
    }
    mw_fault_point("setup", topo->world_rank);
    rc = mw_evaluator_agree_setup(topo, rc);
    if (rc == MW_OK)
        rc = mw_evaluator_agree_start(topo, MW_OK);
    if (rc == MW_OK)
        mw_log_info("evaluator: waiting for checkpoints from the chief (evaluating on %s)",
                    s.dev.use_gpu ? "the GPU" : "the CPU");
    const int started = rc == MW_OK;
    int started_agreed = 0; /* a preemption: the trainers end with the same code, no abort */
    while (rc == MW_OK) {
        long number = 0, nbytes = 0;
        char *buf = NULL;
        rc = receive(topo, o->collective_timeout, &number, &buf, &nbytes);
        if (rc == MW_OK && number == -2) { /* the trainers stopped: end as they do */
            free(buf);
            rc = mw_err(MW_EPREEMPTED, "evaluator: the trainers were preempted and saved their "
                                       "step; run again with --resume");
            started_agreed = 1;
            break;
        }
        if (rc == MW_OK && number < 0) {
            free(buf);
            mw_log_info("evaluator: training has finished");
            break;
        }
        if (rc == MW_OK)
            rc = evaluate_one(&s, &sum, number, buf, nbytes);
        free(buf);
    }
    *mid_run = started && rc != MW_OK && !started_agreed; /* the trainers are past their
                                                           * agreements */
    if (!*mid_run) {
        mw_summary_close(&sum);
        mw_session_close(&s, 0);
    }
    return rc;
}
