/* The training loop of `mwtrain train`; see train.h and docs/design.md.
 *
 * Set-up, on every training rank (the evaluator task runs evaluator.c instead):
 *   local set-up (session.c)                          -> agreed over the world (evaluator.h)
 *   the same device kind, replicas and steps per epoch everywhere; the backend's
 *   all-reduce; the chief's initial weights           -> agreed over the trainers
 *   --resume: the chief reads, broadcasts, all apply  -> agreed (chief.c)
 *   the chief's summary writer                        -> agreed; then the evaluator learns
 *                                                        whether training starts
 * A step: this rank's replica slices of the global batch -> gradients -> all-reduce ->
 * the same update on every replica -> metrics; the chief's duties at step and epoch ends.
 * After each step the ranks vote on stopping (vote_step): a preemption signal on any rank
 * (common/preempt.h) or a non-finite loss on any rank. The vote of step k is a small
 * non-blocking all-reduce started after step k and read after step k + 1, so it overlaps a
 * step and every rank reads the same answer at the same step: preempted, every rank stops
 * there, the chief saves that step and all return MW_EPREEMPTED once the save is agreed (a
 * rank that left first would make mpirun kill the chief mid-save); diverged, all return
 * MW_EDIVERGED with nothing saved. Those outcomes are agreed; any other failure after start
 * ends the job (*mid_run). */
#include "worker/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/comm.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/preempt.h"
#include "common/rng.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "worker/chief.h"
#include "worker/evaluator.h"
#include "worker/progress.h"
#include "worker/session.h"
#include "worker/summary.h"

typedef struct {
    mw_session s;
    mw_summary sum;  /* chief only */
    mw_evlink ev;    /* chief: the evaluator task, if any */
    uint32_t *order; /* the epoch's permutation of the training set */
    double *secs;    /* this epoch's step times without the all-reduce (straggler note) */
    double *gather;  /* MW_SUMS sums and one median step time per rank: the epoch's all-reduce */
    struct {         /* the stop vote in flight (vote_step) */
        MPI_Request req;
        int mine, all, pending;
        long step; /* the global step the pending vote was cast after */
    } vote;
    int agreed;   /* the run ended by an agreed outcome (preempted, diverged): not mid-run */
    long skipped; /* mixed_float16: steps skipped for non-finite gradients this epoch */
    double skipped_examples; /* their global batches' examples (for the epoch's examples/s) */
    int stop_after;          /* a preemption agreed at an epoch's last step: stop after its end */
} trainer;

/* What a rank votes for after a step (bits of an MPI_BOR all-reduce). */
enum { STOP_SIGNAL = 1, STOP_NONFINITE = 2 };

/* Steps per epoch: from the data set, the same on every rank unless the ranks read
 * different files; agreed in agree_layout. */
static long steps_per_epoch(const mw_session *s)
{
    const long gb = mw_session_global_batch(s);
    long steps = (mw_session_epoch_examples(s) + gb - 1) / gb;
    if (s->o->steps_per_epoch > 0 && s->o->steps_per_epoch < steps)
        steps = s->o->steps_per_epoch;
    return steps;
}

/* Every rank on the same kind of device (GPU ranks sum with NCCL, CPU ranks with the host
 * all-reduce, and the two cannot meet), with the same replicas, for the same steps. */
static mw_status agree_layout(const mw_session *s)
{
    int lo, hi;
    MW_TRY(mw_agree_range(s->comm, s->dev.use_gpu, &lo, &hi, "device agreement"));
    if (lo != hi)
        return mw_err(MW_EDEVICE,
                      "some ranks train on a GPU and others on the CPU (--device "
                      "auto on nodes with and without GPUs): use --device cpu, or GPUs on "
                      "every node");
    /* one replica per GPU by default: GPUs per rank may differ */
    MW_TRY(mw_agree_range(s->comm, s->o->replicas_per_worker, &lo, &hi, "replica agreement"));
    if (lo != hi)
        return mw_err(MW_EINVAL,
                      "ranks run different numbers of replicas (%d to %d): with "
                      "--device gpu a rank runs one per GPU it drives by default, so give every "
                      "rank the same number of GPUs, or set --replicas-per-worker",
                      lo, hi);
    /* the all-reduces of the last steps would wait forever */
    long mine = steps_per_epoch(s);
    long *all = calloc((size_t)s->world, sizeof *all);
    if (!all)
        return mw_err(MW_ENOMEM, "out of memory");
    mw_wait_ctx w = {"steps agreement", -1, s->o->collective_timeout};
    mw_status rc = mw_comm_allgather(&w, &mine, all, 1, MPI_LONG, s->comm);
    for (int r = 1; r < s->world && rc == MW_OK; r++)
        if (all[r] != all[0])
            rc = mw_err(MW_EDATA,
                        "ranks disagree on the steps per epoch: rank 0 has %ld, rank "
                        "%d has %ld (their training sets differ: check --data-dir on every "
                        "node)",
                        all[0], r, all[r]);
    free(all);
    return rc;
}

/* The collective half of set-up, entered by every training rank after the local half
 * succeeded everywhere. */
static mw_status setup_collective(trainer *t)
{
    mw_session *s = &t->s;
    MW_TRY(agree_layout(s));
    MW_TRY(s->ops->connect(s->rep));
    /* Every replica starts from the chief's weights. */
    mw_wait_ctx w = {"broadcast of the initial weights", -1, s->o->collective_timeout};
    MW_TRY(
        mw_comm_bcast(&w, s->model.params.data, (int)s->model.params.count, MPI_FLOAT, 0, s->comm));
    MW_TRY(s->ops->push(s->rep, 0));
    if (s->rank == 0) {
        char how[512];
        s->ops->describe(s->rep, how, sizeof how);
        mw_log_info("%d rank(s) on %d node(s) x %d replica(s), global batch %ld, %s, %zu "
                    "parameters",
                    s->world, s->topo->nnodes, s->o->replicas_per_worker,
                    mw_session_global_batch(s), how, s->model.nparams);
    }
    return MW_OK;
}

/* Chief: a checkpoint now, handed to the evaluator task when there is one and evaluate is set
 * (a preemption's is not: the stop waits for nothing). */
static mw_status save(trainer *t, int epochs_done, long step_in_epoch, int evaluate)
{
    long number = 0;
    void *bytes = NULL;
    size_t nbytes = 0;
    const int ev = evaluate && t->ev.rank >= 0;
    MW_TL_BEGIN("checkpoint", "checkpoint");
    MW_TRY(mw_chief_save(&t->s, epochs_done, step_in_epoch, &number, ev ? &bytes : NULL, &nbytes));
    mw_status rc = ev ? mw_evlink_send(&t->ev, number, bytes, nbytes, t->s.global_step) : MW_OK;
    MW_TL_END("checkpoint", "checkpoint");
    return rc;
}

/* The dropout key of global step `step`. */
static uint64_t dropout_seed(const mw_session *s, long step)
{
    return mw_rng_hash(s->seed, 0x64726f70, (uint64_t)step);
}

static mw_status diverged(trainer *t, const char *what);

/* Keras' LossScaleOptimizer after a step (mixed_float16): a finite one counts toward doubling
 * the scale (after loss_scale_growth of them in a row); a non-finite one was skipped and
 * halves it. Every rank decides alike: the summed gradients are the same bits everywhere. A
 * scale under 2^-24 (float16's smallest step) cannot help any more: the run diverged. */
static mw_status loss_scale_next(trainer *t, int finite)
{
    mw_session *s = &t->s;
    if (finite) {
        if (++s->loss_scale_steps >= s->o->loss_scale_growth) /* bounded: checkpoint.c */
            s->loss_scale *= s->loss_scale < MW_LOSS_SCALE_MAX ? 2 : 1, s->loss_scale_steps = 0;
        return MW_OK;
    }
    s->loss_scale /= 2, s->loss_scale_steps = 0;
    t->skipped++;
    if (s->loss_scale >= MW_LOSS_SCALE_MIN)
        return MW_OK;
    char what[160];
    snprintf(what, sizeof what,
             "the gradient of step %ld (mixed_float16, with the loss scale halved down to "
             "2^-24)",
             s->global_step);
    return diverged(t, what);
}

/* One step: the global batch of gb examples starting at example start of the epoch's order;
 * next_gb: the next step's, which follows it in the order (0: none in this epoch). Under
 * mixed_float16 the loss is scaled, and a step whose summed gradients are not all finite
 * updates nothing but BatchNormalization's moving statistics, as Keras' LossScaleOptimizer
 * (its optimizer iterations do not count it). */
static mw_status step(trainer *t, long start, long gb, long next_gb, double *secs)
{
    mw_session *s = &t->s;
    const double t0 = mw_now();
    const uint64_t dseed = dropout_seed(s, s->global_step);
    if (mw_timeline_on) {
        mw_timeline_step(s->global_step);
        mw_timeline_begin("step", "step");
        mw_timeline_begin("forward/backward", "compute");
    }
    mw_fault_slow(s->rank);
    if (s->loss_scale > 0)
        s->model.loss_scale = (float)s->loss_scale;
    MW_TRY(s->ops->grads(s->rep, &s->train, t->order + start, gb, dseed, s->global_step));
    MW_TRY(mw_dataset_status(&s->train)); /* an image that did not decode ends the job */
    *secs = mw_now() - t0;
    MW_TL_END("forward/backward", "compute");
    MW_TL_BEGIN("all-reduce", "allreduce");
    MW_TRY(s->ops->allreduce(s->rep, s->global_step));
    MW_TL_END("all-reduce", "allreduce");
    if (next_gb > 0 && s->ops->prefetch)
        MW_TRY(s->ops->prefetch(s->rep, &s->train, t->order + start + gb, next_gb,
                                dropout_seed(s, s->global_step + 1)));
    MW_TL_BEGIN("update", "update");
    const int scaling = s->loss_scale > 0;
    int finite = 1;
    if (scaling)
        MW_TRY(s->ops->finite(s->rep, &finite));
    mw_optim_hyper h;
    if (finite)
        mw_optimizer_hyper(s->o, &s->opt_step, &h);
    if (finite && scaling) /* unscaled: exact, the scale is a power of 2 */
        h.gscale = (float)(1.0 / s->loss_scale);
    MW_TRY(s->ops->update(s->rep, finite ? &h : NULL));
    t->skipped_examples += finite ? 0.0 : (double)gb;
    if (mw_timeline_on) {
        mw_timeline_end("update", "update");
        mw_timeline_end("step", "step");
        mw_timeline_step(-1);
    }
    s->global_step++;
    return scaling ? loss_scale_next(t, finite) : MW_OK;
}

/* After a step: read the vote cast after the step before (every rank reads the same answer,
 * *stop: the bits any rank set then, *at: the global step they were cast after), then, unless
 * that says stop or this is the final read of the run, cast this rank's vote on this step: a
 * preemption signal, or a non-finite local loss so far this epoch. No vote is left in flight
 * when the run stops. */
static mw_status vote_step(trainer *t, int final, int *stop, long *at)
{
    mw_session *s = &t->s;
    *stop = 0, *at = -1;
    if (t->vote.pending) {
        mw_wait_ctx w = {"stop vote all-reduce", s->global_step, s->o->collective_timeout};
        MW_TRY(mw_comm_wait(&w, &t->vote.req, 1, NULL));
        t->vote.pending = 0;
        *stop = t->vote.all, *at = t->vote.step;
    }
    if (final || *stop)
        return MW_OK;
    double sums[MW_SUMS];
    s->ops->metrics(s->rep, sums, 0);
    t->vote.mine = (mw_preempt_requested() ? STOP_SIGNAL : 0) |
                   (isfinite(sums[MW_SUM_LOSS]) ? 0 : STOP_NONFINITE);
    t->vote.all = 0;
    t->vote.step = s->global_step;
    mw_wait_ctx w = {"stop vote all-reduce", s->global_step, s->o->collective_timeout};
    MW_MPI(MPI_Iallreduce(&t->vote.mine, &t->vote.all, 1, MPI_INT, MPI_BOR, s->comm, &t->vote.req),
           w.op);
    t->vote.pending = 1;
    return MW_OK;
}

/* The agreed end of a diverged run (what: the value that was not finite, and when):
 * nothing is saved from this state. */
static mw_status diverged(trainer *t, const char *what)
{
    t->agreed = 1;
    return mw_err(MW_EDIVERGED,
                  "the run diverged: %s was not finite; nothing was saved from it, the earlier "
                  "checkpoints stay (lower the learning rate, or check the optimizer's settings "
                  "and the data) (exit 8)",
                  what);
}

/* The agreed end of a preempted run at this step boundary (epochs_done, step_in_epoch, as
 * a checkpoint names it): the chief saves unless the step is saved already, every rank learns
 * that the save succeeded, the evaluator task is told, and all return MW_EPREEMPTED. */
static mw_status preempt(trainer *t, int epochs_done, long step_in_epoch)
{
    mw_session *s = &t->s;
    mw_status rc = MW_OK;
    if (s->rank == 0 && mw_chief_checkpointing(s->o) && s->saved_step != s->global_step)
        rc = save(t, epochs_done, step_in_epoch, 0);
    if (rc == MW_OK && s->rank == 0 && mw_chief_checkpointing(s->o))
        rc = mw_chief_mark_preempted(s, mw_preempt_requested() != 0);
    MW_TRY(mw_agree(s->comm, rc, NULL));
    mw_preempt_quiet(); /* saved: a launcher ending the ranks now ends nothing unsaved */
    if (s->rank == 0)
        MW_TRY(mw_evlink_preempted(&t->ev, s->global_step));
    t->agreed = 1;
    char when[64] = "";
    if (mw_preempt_requested())
        snprintf(when, sizeof when, ", %.3f s after the signal", mw_preempt_elapsed());
    const char *who = mw_preempt_requested() ? "a signal" : "a signal to another rank";
    if (!mw_chief_checkpointing(s->o))
        return mw_err(MW_EPREEMPTED,
                      "preempted (%s) after step %ld%s; nothing was saved "
                      "(--checkpoint-every-epochs 0) (exit 133)",
                      who, s->global_step, when);
    return mw_err(MW_EPREEMPTED,
                  "preempted (%s) after step %ld (epoch %d, step %ld of it): saved in %s%s; "
                  "run again with --resume to continue from there (exit 133)",
                  who, s->global_step, epochs_done + (step_in_epoch > 0), step_in_epoch,
                  s->o->checkpoint_dir, when);
}

/* The chief's duties after an epoch: its line, the summaries, a checkpoint after epochs
 * 1, 1+N, ... (the tutorial's zero-based epoch % 2 == 0) and after the last one, so a
 * finished run can be evaluated and resumed. */
static mw_status chief_epoch_end(trainer *t, int epoch, const mw_epoch_metrics *em)
{
    mw_session *s = &t->s;
    const mw_train_opts *o = s->o;
    char note[160];
    mw_chief_straggler_note(note, sizeof note, t->gather + MW_SUMS, s->world);
    char tr[160], te[160];
    mw_session_metric_text(s, tr, sizeof tr, "", em->train_metric, 0);
    mw_session_metric_text(s, te, sizeof te, "Test ", em->test_metric, 0);
    printf("Epoch %d, Loss: %.4f, %s, Test Loss: %.4f, %s, Time: %.2f s, %s: %.0f%s\n", epoch + 1,
           em->train_loss, tr, em->test_loss, te, em->seconds, mw_session_throughput(s, 0),
           em->examples_per_sec, note);
    fflush(stdout);
    MW_TRY(mw_chief_summaries(s, &t->sum, epoch, em));
    const int every = o->checkpoint_every_epochs;
    if (mw_chief_checkpointing(o) && ((every > 0 && epoch % every == 0) || epoch + 1 == o->epochs))
        MW_TRY(save(t, epoch + 1, 0, 1));
    return MW_OK;
}

/* The epoch's running sums over every rank (kernels.h' MW_SUM_*: the scaled loss, examples,
 * metrics) into sums, and every rank's median step time (its own slot, the others 0, so one
 * sum gathers them) into t->gather + MW_SUMS: one all-reduce at the epoch's end, of the sums
 * the metrics use and the times. */
static mw_status epoch_sums(trainer *t, double *sums, long nsteps)
{
    mw_session *s = &t->s;
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    const int len = mw_sums_len(&ml);
    double *g = t->gather;
    memset(g, 0, (MW_SUMS + (size_t)s->world) * sizeof *g);
    memcpy(g, sums, MW_SUMS * sizeof *g);
    if (nsteps > 0)
        g[MW_SUMS + s->rank] = mw_median(t->secs, (int)nsteps);
    /* the used sums, then the times: moved next to them for the one reduction */
    memmove(g + len, g + MW_SUMS, (size_t)s->world * sizeof *g);
    mw_wait_ctx w = {"training metrics all-reduce", s->global_step, s->o->collective_timeout};
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, g, len + s->world, MPI_DOUBLE, MPI_SUM, s->comm, &req),
           w.op);
    MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
    memmove(g + MW_SUMS, g + len, (size_t)s->world * sizeof *g);
    memcpy(sums, g, (size_t)len * sizeof *g);
    return MW_OK;
}

/* mixed_float16, at an epoch's end: the log line of the loss scale and the steps skipped; returns
 * them (and their examples in *examples) and starts the next epoch's count. */
static long take_skipped(trainer *t, int epoch, double *examples)
{
    const mw_session *s = &t->s;
    if (s->loss_scale > 0 && s->rank == 0)
        mw_log_info("epoch %d: loss scale %.17g after %ld step(s) skipped for non-finite gradients "
                    "(mixed_float16)",
                    epoch + 1, s->loss_scale, t->skipped);
    const long skipped = t->skipped;
    *examples = t->skipped_examples;
    t->skipped = 0, t->skipped_examples = 0;
    return skipped;
}

/* The epoch's training results from the running sums over every rank of nsteps steps, of
 * which skipped were skipped (mixed_float16: their loss and metrics are not in the sums, their
 * extra examples count toward the throughput only): an epoch whose every step was skipped has
 * no loss (NaN, as its metrics). */
static void train_results(const mw_session *s, const double *sums, long nsteps, long skipped,
                          double extra, double secs, mw_epoch_metrics *em)
{
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    const long taken = nsteps - skipped;
    em->train_loss = taken > 0 ? sums[MW_SUM_LOSS] / (double)taken : nsteps > 0 ? NAN : 0;
    for (int i = 0; i < MW_METRICS_MAX; i++)
        em->train_metric[i] = mw_metrics_value(&ml, i, sums);
    em->seconds = secs;
    /* examples, or tokens (examples x positions) for a sequence model */
    em->examples_per_sec =
        secs > 0 ? (sums[MW_SUM_COUNT] + extra) * (double)mw_session_positions(s) / secs : 0;
}

/* Queue this rank's share of the gb examples at order + start for the decoding pool (encoded
 * images with --decode-threads; nothing otherwise): its replicas' slices are contiguous. */
static void hint_share(trainer *t, long start, long gb)
{
    mw_session *s = &t->s;
    if (!s->train.prefetch || gb <= 0)
        return;
    const int rpw = s->o->replicas_per_worker, nrep = s->world * rpw;
    long off0, c0, off1, c1;
    mw_slice(gb, nrep, s->rank * rpw, &off0, &c0);
    mw_slice(gb, nrep, s->rank * rpw + rpw - 1, &off1, &c1);
    mw_dataset_prefetch_hint(&s->train, t->order + start + off0, (uint32_t)(off1 + c1 - off0));
}

/* The epoch's wait for the decoding pool on this rank, when it is more than 5 % of the epoch. */
static void note_input_wait(mw_session *s, int epoch, double secs)
{
    const double w = mw_dataset_input_wait(&s->train);
    if (secs > 0 && w > 0.05 * secs)
        mw_log_info("epoch %d: %.2f s (%.0f %%) waiting for decoded images: more --decode-threads, "
                    "or faster storage",
                    epoch + 1, w, 100 * w / secs);
}

/* The epoch's order of its N examples (global batches of GB), and what is keyed by it. */
static void epoch_order(trainer *t, int epoch, long N, long GB)
{
    mw_session *s = &t->s;
    if (s->plan.ids) /* --shard-policy file: each rank's slices from its own shards */
        mw_shard_plan_order(&s->plan, t->order, !s->o->no_shuffle, s->seed, epoch);
    else if (s->o->no_shuffle)
        mw_dataset_file_order(t->order, (uint32_t)N);
    else
        mw_dataset_epoch_order(t->order, (uint32_t)N, s->seed, epoch);
    s->train.epoch = epoch, s->train.aug_seed = s->seed; /* augmentation key (worker/data/data.h) */
    mw_dataset_mask_batches(&s->train, t->order, N, GB); /* a masked loss: per global batch */
}

static mw_status run_epoch(trainer *t, int epoch, mw_epoch_metrics *em)
{
    mw_session *s = &t->s;
    const mw_train_opts *o = s->o;
    const int rpw = o->replicas_per_worker, nrep = s->world * rpw;
    const long GB = mw_session_global_batch(s), N = mw_session_epoch_examples(s);
    const long steps = steps_per_epoch(s);
    const long first = epoch == s->start_epoch ? s->start_step : 0;
    mw_progress_state prog;
    epoch_order(t, epoch, N, GB);
    double sums[MW_SUMS] = {0}; /* kernels.h' MW_SUM_* (local, then all) */
    double t0 = mw_now(), seen_local = 0;
    if (s->rank == 0)
        mw_progress_begin(&prog, stderr, (int)o->progress, o->progress_interval, epoch + 1,
                          o->epochs, (int)steps);
    for (long k = first; k < steps; k++) {
        const long start = k * GB, gb = N - start < GB ? N - start : GB;
        const long next = start + gb, next_gb = k + 1 < steps ? (N - next < GB ? N - next : GB) : 0;
        if (k == first)
            hint_share(t, start, gb);
        hint_share(t, next, next_gb); /* decoded while this step computes */
        MW_TRY(step(t, start, gb, next_gb, &t->secs[k - first]));
        seen_local += (double)gb;
        int stop;
        long at;
        MW_TRY(vote_step(t, 0, &stop, &at));
        if (stop & STOP_NONFINITE) {
            char what[96];
            snprintf(what, sizeof what, "the training loss on some rank by step %ld", at + 1);
            return diverged(t, what);
        }
        if ((stop & STOP_SIGNAL) && k + 1 < steps) {
            if (s->rank == 0)
                mw_progress_end(&prog);
            return preempt(t, epoch, k + 1);
        }
        if (stop & STOP_SIGNAL) /* the epoch's last step: its end first, then stop */
            t->stop_after = 1;
        if (s->rank != 0)
            continue;
        double el = mw_now() - t0;
        s->ops->metrics(s->rep, sums, 0);
        /* the local replicas' share, scaled to an estimate of the global step loss */
        const long taken = k + 1 - first - t->skipped; /* a skipped step's loss is not in */
        double est = taken > 0 ? sums[MW_SUM_LOSS] * nrep / rpw / (double)taken : 0;
        mw_progress_update(&prog, (int)(k + 1), est, el > 0 ? seen_local / el : 0);
        if (o->checkpoint_every_steps > 0 && k + 1 < steps &&
            s->global_step % o->checkpoint_every_steps == 0) {
            mw_progress_end(&prog);
            MW_TRY(save(t, epoch, k + 1, 1));
        }
    }
    const double train_time = mw_now() - t0;
    if (s->rank == 0)
        mw_progress_end(&prog);
    note_input_wait(s, epoch, train_time);
    s->ops->metrics(s->rep, sums, 1);
    double extra;
    const long skipped = take_skipped(t, epoch, &extra);
    MW_TRY(epoch_sums(t, sums, steps - first));
    train_results(s, sums, steps - first, skipped, extra, train_time, em);
    MW_TL_BEGIN("evaluate", "evaluate");
    MW_TRY(mw_session_evaluate(s, &em->test_loss, em->test_metric));
    MW_TL_END("evaluate", "evaluate");
    /* every rank holds the same all-reduced sums: the same decision everywhere (an epoch of
     * skipped steps only has no training loss: the loss scale judges those) */
    if ((!isfinite(em->train_loss) && skipped < steps - first) || !isfinite(em->test_loss)) {
        char what[96];
        snprintf(what, sizeof what, "the %s loss of epoch %d (step %ld)",
                 isfinite(em->train_loss) ? "test" : "training", epoch + 1, s->global_step);
        return diverged(t, what);
    }
    MW_TRY(s->rank == 0 ? chief_epoch_end(t, epoch, em) : MW_OK);
    mw_timeline_flush();
    return MW_OK;
}

static mw_status train_epochs(trainer *t, mw_epoch_metrics *last)
{
    mw_session *s = &t->s;
    for (int epoch = s->start_epoch; epoch < s->o->epochs; epoch++) {
        mw_epoch_metrics em;
        MW_TRY(run_epoch(t, epoch, &em));
        if (last)
            *last = em;
        if (t->stop_after && epoch + 1 < s->o->epochs)
            return preempt(t, epoch + 1, 0);
    }
    int stop; /* the last vote: training has finished whatever it says */
    long at;
    MW_TRY(vote_step(t, 1, &stop, &at));
    if (s->o->dump_weights && s->rank == 0)
        MW_TRY(mw_chief_dump_weights(s, s->o->dump_weights));
    /* training has finished: the evaluator may go */
    return s->rank == 0 ? mw_evlink_finish(&t->ev, s->global_step) : MW_OK;
}

/* --timeline: this training rank's trace, its track named after the rank and task. */
static mw_status timeline_open(const char *pattern, const mw_topology *topo)
{
    char path[4096], name[160];
    const mw_rank_info *me = &topo->ranks[topo->rank];
    MW_TRY(mw_timeline_path(path, sizeof path, pattern, topo->rank, topo->ntrain));
    snprintf(name, sizeof name, "rank %d (%s %d, %s)", topo->rank, mw_job_name(me->job),
             me->job_index, me->host ? me->host : "?");
    return mw_timeline_open(path, topo->rank, name);
}

/* Everything before the first step (see the top of this file); agreed. */
static mw_status setup(trainer *t, const mw_train_opts *o, const mw_topology *topo)
{
    mw_session *s = &t->s;
    const int has_eval = topo->ntrain < topo->world_size;
    /* --resume without --model: the checkpoint's model, on every task (the evaluator too) */
    mw_status rc = o->resume ? mw_chief_fetch_model(s, o, topo->world) : MW_OK;
    if (rc == MW_OK)
        rc = mw_session_open(s, o, topo, MW_USE_TRAIN);
    if (rc == MW_OK && (!(t->order = malloc(sizeof *t->order * (s->train.count + 1))) ||
                        !(t->secs = malloc(sizeof *t->secs * (size_t)(steps_per_epoch(s) + 1))) ||
                        !(t->gather = malloc(sizeof *t->gather * (size_t)(MW_SUMS + s->world)))))
        rc = mw_err(MW_ENOMEM, "cannot allocate the epoch order");
    if (rc == MW_OK && o->timeline)
        rc = timeline_open(o->timeline, topo);
    if (rc == MW_OK && s->rank == 0 && (mw_chief_checkpointing(o) || o->resume))
        rc = mw_chief_check_dir(o->checkpoint_dir);
    mw_fault_point("setup", topo->world_rank);
    MW_TRY(mw_evaluator_agree_setup(topo, rc));
    rc = mw_agree(topo->train, setup_collective(t), NULL);
    int restored = 0;
    if (rc == MW_OK && o->resume) {
        mw_fault_point("restore", topo->world_rank);
        rc = mw_chief_restore(s, 0, 0, &restored);
    }
    if (rc == MW_OK) { /* every rank agrees on the chief's summary writer */
        mw_status mine = MW_OK;
        if (s->rank == 0 && o->summary_dir[0])
            mine = mw_summary_open(&t->sum, o->summary_dir, restored);
        rc = mw_agree(topo->train, mine, NULL);
    }
    if (has_eval)
        rc = mw_evaluator_agree_start(topo, rc);
    if (rc == MW_OK && restored && s->start_epoch >= s->o->epochs && s->rank == 0)
        mw_log_info("the checkpoint is at epoch %d of %d: nothing left to train", s->start_epoch,
                    s->o->epochs);
    return rc;
}

mw_status mw_train_run(const mw_train_opts *o, const mw_topology *topo, mw_epoch_metrics *last,
                       int *mid_run)
{
    *mid_run = 0;
    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    mw_session_init(&t->s);
    mw_summary_init(&t->sum);
    mw_evlink_init(&t->ev, topo, o->collective_timeout);
    mw_status rc = setup(t, o, topo);
    if (rc == MW_OK) {
        rc = train_epochs(t, last);
        *mid_run = rc != MW_OK && !t->agreed;
    }
    /* a set-up wait that timed out (or MPI failing) cannot be agreed either */
    if (mw_status_exit_code(rc) >= 128 && !t->agreed)
        *mid_run = 1;
    /* after a failure mid-run a peer may be gone: the caller aborts the job, and nothing
     * that would wait for a peer is released */
    mw_session_close(&t->s, *mid_run);
    mw_summary_close(&t->sum);
    mw_chief_release_dir();           /* the checkpoint directory's lock, if set-up took it */
    if (mw_timeline_close() != MW_OK) /* the run's outcome stands; the trace is lost */
        mw_log_warn("%s", mw_err_msg());
    if (!*mid_run)
        mw_evlink_free(&t->ev);
    free(t->order);
    free(t->secs);
    free(t->gather);
    free(t);
    return rc;
}
