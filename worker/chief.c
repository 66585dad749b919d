/* The chief's duties; see chief.h. */
#include "worker/chief.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/comm.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/timer.h"
#include "worker/checkpoint_dir.h"
#include "worker/checkpoint_pack.h"
#include "worker/keras/keras_vars.h"

int mw_chief_checkpointing(const mw_train_opts *o)
{
    return o->checkpoint_every_epochs > 0 || o->checkpoint_every_steps > 0;
}

/* The lock on the checkpoint directory this process trains with (chief.h), and what its
 * set-up removed, for --resume's message. One per process. */
static struct {
    int fd; /* -1 when none is held */
    char removed[512];
} held = {-1, ""};

/* "PID 1234 on host node-a" from the holder's lock file text "node-a 1234". */
static void describe_holder(int fd, char *out, size_t cap)
{
    char text[300] = "", host[256];
    long pid = 0;
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (sscanf(text, "%255s %ld", host, &pid) == 2 && pid > 0)
        snprintf(out, cap, "PID %ld on host %s", pid, host);
    else
        snprintf(out, cap, "another process (its lock file does not say which yet)");
}

/* Take the lock DIR/.mwtrain.lock (flock, exclusive, not waiting) and write "host pid" into it.
 * The kernel releases a flock when its holder dies, so a lock file left by a dead process
 * holds only stale text, overwritten here. */
static mw_status lock_dir(const char *dir)
{
    char path[4200];
    MW_TRY(mw_fs_join(path, sizeof path, dir, MW_CHIEF_LOCK));
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return mw_err(MW_EIO, "--checkpoint-dir %s: not writable: cannot create %s (%s)", dir,
                      MW_CHIEF_LOCK, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mw_err(MW_EIO,
                      "--checkpoint-dir %s: %s is not a regular file (expected the lock "
                      "file mwtrain creates)",
                      dir, MW_CHIEF_LOCK);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char who[320];
        describe_holder(fd, who, sizeof who);
        close(fd);
        if (e == EWOULDBLOCK)
            return mw_err(MW_EINVAL,
                          "--checkpoint-dir %s is in use by another job: %s holds its lock %s "
                          "(one job per checkpoint directory: give this job its own "
                          "--checkpoint-dir, or wait for that one to end)",
                          dir, who, path);
        /* a file system without flock: train, unprotected */
        mw_log_warn("--checkpoint-dir %s: cannot lock %s (%s); nothing stops a second job from "
                    "using this directory at the same time",
                    dir, path, strerror(e));
        return MW_OK;
    }
    char host[256] = "unknown", text[300];
    if (gethostname(host, sizeof host) != 0 || !host[0])
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    int n = snprintf(text, sizeof text, "%s %ld\n", host, (long)getpid());
    ssize_t w = ftruncate(fd, 0) != 0 ? -1 : pwrite(fd, text, (size_t)n, 0);
    if (w != n) {
        int e = w < 0 ? errno : ENOSPC;
        close(fd);
        return mw_err(MW_EIO, "--checkpoint-dir %s: not writable: cannot write %s (%s)", dir,
                      MW_CHIEF_LOCK, strerror(e));
    }
    held.fd = fd;
    return MW_OK;
}

mw_status mw_chief_check_dir(const char *dir)
{
    mw_chief_release_dir(); /* one lock per process */
    held.removed[0] = '\0';
    MW_TRY(mw_fs_mkdir_p(dir, "--checkpoint-dir"));
    MW_TRY(lock_dir(dir));
    /* no other job saves here now: what a crashed save left behind can go */
    if (mw_ckpt_remove_temps(dir, held.removed, sizeof held.removed) > 0)
        mw_log_info("removed leftover temporary files of an interrupted save from %s: %s", dir,
                    held.removed);
    /* a preemption mark belongs to the run it ended; this is a new one */
    char mark[4200];
    if (mw_fs_join(mark, sizeof mark, dir, MW_CHIEF_PREEMPTED) == MW_OK)
        (void)unlink(mark);
    return MW_OK;
}

mw_status mw_chief_mark_preempted(const mw_session *s, int signal_here)
{
    char text[512];
    int n = snprintf(text, sizeof text,
                     "preempted after step %ld (a signal%s); checkpoint of step %ld saved\n",
                     s->global_step, signal_here ? "" : " to another rank", s->saved_step);
    return mw_fs_write_atomic(s->o->checkpoint_dir, MW_CHIEF_PREEMPTED, text, (size_t)n,
                              "--checkpoint-dir");
}

void mw_chief_release_dir(void)
{
    if (held.fd < 0)
        return;
    /* empty the text so that it never names a finished job (on failure it goes stale: harmless,
     * the kernel's flock is what counts) */
    int e = ftruncate(held.fd, 0);
    (void)e;
    close(held.fd);
    held.fd = -1;
}

/* Broadcast n bytes from rank 0 of comm in pieces MPI's int counts can hold. */
static mw_status bcast_bytes(MPI_Comm comm, const mw_wait_ctx *w, void *buf, size_t n)
{
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {
        size_t k = n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30);
        MW_TRY(mw_comm_bcast(w, (char *)buf + off, (int)k, MPI_BYTE, 0, comm));
    }
    return MW_OK;
}

/* Rank 0: the latest valid checkpoint of dir, serialized into *buf (*n bytes) for the
 * broadcast, its N (ckpt-N) into *number, and (model non-NULL) its model text into *model
 * (NULL when it names none); logs which one. */
static mw_status read_latest(const char *dir, void **buf, size_t *n, long *number, char **model)
{
    mw_ckpt c;
    mw_ckpt_init(&c);
    char *path = NULL;
    mw_status rc = mw_ckpt_load_latest(dir, &c, &path);
    if (rc == MW_OK)
        rc = mw_ckpt_serialize(&c, buf, n);
    if (rc == MW_OK) {
        const char *base = strrchr(path, '/');
        if (sscanf(base ? base + 1 : path, "ckpt-%ld", number) != 1)
            *number = -1;
        mw_log_info("restoring %s (epoch %d, step %ld of it, %ld steps in all)", path, c.epoch,
                    c.step_in_epoch, c.global_step);
        if (model && c.model_json && c.model_json[0]) {
            *model = c.model_json;
            c.model_json = NULL;
            mw_log_info("model: the one saved in %s (no --model given)", path);
        }
    }
    free(path);
    mw_ckpt_free(&c);
    return rc;
}

/* Rank 0: read_latest when dir holds anything worth reading; *found = 0 (and nothing read,
 * nothing said) when it is empty or holds only leftovers, described in *sv. */
static mw_status load_dir(const char *dir, void **buf, size_t *n, long *number, char **model,
                          int *found, mw_ckpt_survey *sv)
{
    *found = 0;
    MW_TRY(mw_ckpt_survey_dir(dir, sv));
    if (!sv->complete)
        return MW_OK;
    MW_TRY(read_latest(dir, buf, n, number, model));
    *found = 1;
    return MW_OK;
}

mw_status mw_chief_fetch_model(mw_session *s, const mw_train_opts *o, MPI_Comm comm)
{
    if (o->model_path)
        return MW_OK;
    int me = 0;
    MW_MPI(MPI_Comm_rank(comm, &me), "checkpoint model");
    long len = 0;
    char *text = NULL;
    mw_status rc = MW_OK;
    if (me == 0) { /* nothing usable: the restore says so */
        mw_ckpt_survey sv;
        int found = 0;
        rc = load_dir(o->checkpoint_dir, &s->latest.bytes, &s->latest.len, &s->latest.number, &text,
                      &found, &sv);
        len = text ? (long)strlen(text) : 0;
    }
    rc = mw_agree(comm, rc, NULL);
    mw_wait_ctx w = {"broadcast of the checkpoint's model", -1, o->collective_timeout};
    if (rc == MW_OK)
        rc = mw_comm_bcast(&w, &len, 1, MPI_LONG, 0, comm);
    if (rc == MW_OK && len > 0 && me != 0 && !(text = malloc((size_t)len + 1)))
        rc = mw_err(MW_ENOMEM, "checkpoint model of %ld bytes: out of memory", len);
    rc = mw_agree(comm, rc, NULL);
    if (rc == MW_OK)
        rc = bcast_bytes(comm, &w, text, (size_t)len);
    if (rc != MW_OK || len == 0) {
        free(text);
        return rc;
    }
    text[len] = '\0';
    s->latest.model = text;
    return MW_OK;
}

/* MW_EDIVERGED unless the parameters and the optimizer's slots (pulled) are all finite: a
 * run whose update overflowed (Adam at learning rate 1e308) can print a finite loss and would
 * save weights that are all NaN, pushing the good checkpoints out of --keep-checkpoints. */
static mw_status check_finite(const mw_session *s, const char *what)
{
    const mw_arena *arenas[4] = {&s->model.params, &s->m1, &s->m2, &s->m3};
    const char *names[4] = {"weights", "optimizer slot 1", "optimizer slot 2", "optimizer slot 3"};
    const int nslots = mw_optimizer_slots(s->o);
    for (int a = 0; a < 1 + nslots; a++) {
        const float *p = arenas[a]->data;
        for (int i = 0; i < s->model.nlayers; i++) {
            const mw_layer *l = &s->model.layers[i];
            const size_t off[3] = {l->w_off, l->b_off, l->stats_off};
            const size_t cnt[3] = {l->w_count, l->b_count, l->stats_count};
            for (int k = 0; k < 3; k++) {
                size_t bad = 0, first = 0;
                for (size_t j = 0; j < cnt[k]; j++)
                    if (!isfinite(p[off[k] + j]) && bad++ == 0)
                        first = j;
                if (bad)
                    return mw_err(MW_EDIVERGED,
                                  "the run diverged: after step %ld the %s of layer '%s' hold "
                                  "%zu non-finite value(s) of %zu (the first: %g at %zu); %s "
                                  "not written, the earlier checkpoints stay; lower the "
                                  "learning rate or check the optimizer's settings",
                                  s->global_step, names[a], l->name, bad, cnt[k],
                                  (double)p[off[k] + first], first, what);
            }
        }
    }
    return MW_OK;
}

mw_status mw_chief_save(mw_session *s, int epochs_done, long step_in_epoch, long *number,
                        void **bytes, size_t *nbytes)
{
    const mw_train_opts *o = s->o;
    const size_t n = s->model.nparams;
    const int nslots = mw_optimizer_slots(o);
    MW_TRY(s->ops->pull(s->rep)); /* a device holds the current state */
    MW_TRY(check_finite(s, "the checkpoint is"));
    mw_ckpt c;
    mw_ckpt_init(&c);
    mw_status rc = MW_OK;
    c.params = malloc(n * sizeof(float));
    float **slots[3] = {&c.slot1, &c.slot2, &c.slot3};
    const mw_arena *arenas[3] = {&s->m1, &s->m2, &s->m3};
    int ok = c.params != NULL;
    for (int i = 0; i < nslots; i++)
        ok &= (*slots[i] = malloc(n * sizeof(float))) != NULL;
    c.model_json = strdup(s->model_json);
    if (!ok || !c.model_json) {
        rc = mw_err(MW_ENOMEM, "checkpoint: out of memory");
        goto done;
    }
    c.nparams = c.nslots = n;
    mw_ckpt_pack(&s->model, c.params, s->model.params.data);
    for (int i = 0; i < nslots; i++)
        mw_ckpt_pack(&s->model, *slots[i], arenas[i]->data);
    snprintf(c.optimizer, sizeof c.optimizer, "%s", mw_opts_optimizer_name(o));
    c.opt_step = s->opt_step;
    c.epoch = epochs_done;
    c.step_in_epoch = step_in_epoch;
    c.global_step = s->global_step;
    c.seed = s->seed;
    c.global_batch = mw_session_global_batch(s);
    c.learning_rate = o->learning_rate;
    c.has_loss_scale = s->loss_scale > 0;
    c.loss_scale = s->loss_scale, c.loss_scale_steps = s->loss_scale_steps;
    int num = 0;
    rc = mw_ckpt_save(o->checkpoint_dir, &c, o->keep_checkpoints, &num);
    if (rc == MW_OK) {
        s->saved_step = s->global_step;
        *number = num;
        mw_log_info("saved checkpoint %s/ckpt-%d (epoch %d, step %ld)", o->checkpoint_dir, num,
                    epochs_done + (step_in_epoch > 0), s->global_step);
    }
    if (rc == MW_OK && bytes)
        rc = mw_ckpt_serialize(&c, bytes, nbytes);
done:
    mw_ckpt_free(&c);
    return rc;
}

/* Rank 0: the bytes to broadcast (hdr: bytes, found, N of ckpt-N), from the checkpoint
 * fetched for its model, or read now. */
static mw_status chief_read(mw_session *s, int required, void **buf, long hdr[3])
{
    const char *dir = s->o->checkpoint_dir;
    if (s->latest.bytes) { /* read already, for its model */
        *buf = s->latest.bytes;
        hdr[0] = (long)s->latest.len, hdr[1] = 1, hdr[2] = s->latest.number;
        s->latest.bytes = NULL;
        return MW_OK;
    }
    mw_ckpt_survey sv;
    size_t n = 0;
    int found = 0;
    MW_TRY(load_dir(dir, buf, &n, &hdr[2], NULL, &found, &sv));
    hdr[0] = (long)n, hdr[1] = found;
    if (found)
        return MW_OK;
    /* Nothing to try: empty, or leftovers only (what this job's set-up removed included). A
     * restart over leftovers must start, not stop for good: only eval and export need one. */
    char debris[sizeof sv.debris + sizeof held.removed + 32];
    snprintf(debris, sizeof debris, "%s%s%s%s", held.removed,
             held.removed[0] ? " (temporary files, removed)" : "",
             held.removed[0] && sv.debris[0] ? ", " : "", sv.debris);
    if (required && debris[0])
        return mw_err(MW_ECKPT,
                      "no usable checkpoint in %s, only leftovers: %s (train with "
                      "--checkpoint-dir %s first)",
                      dir, debris, dir);
    if (required)
        return mw_err(MW_ECKPT, "no checkpoint in %s (train with --checkpoint-dir %s first)", dir,
                      dir);
    if (debris[0])
        mw_log_warn("--resume: no usable checkpoint in %s, only leftovers: %s; starting from "
                    "scratch",
                    dir, debris);
    else
        mw_log_info("--resume: no checkpoint in %s yet; starting from scratch", dir);
    return MW_OK;
}

mw_status mw_chief_restore(mw_session *s, int required, int weights_only, int *restored)
{
    *restored = 0;
    long hdr[3] = {0, 0, -1}; /* bytes, found, N of ckpt-N */
    void *buf = NULL;
    mw_status rc = s->rank == 0 ? chief_read(s, required, &buf, hdr) : MW_OK;
    rc = mw_agree(s->comm, rc, NULL);
    mw_wait_ctx w = {"checkpoint broadcast", -1, s->o->collective_timeout};
    if (rc == MW_OK)
        rc = mw_comm_bcast(&w, hdr, 3, MPI_LONG, 0, s->comm);
    if (rc != MW_OK || !hdr[1]) {
        free(buf);
        return rc;
    }
    if (s->rank != 0 && !(buf = malloc((size_t)hdr[0])))
        rc = mw_err(MW_ENOMEM, "checkpoint of %ld bytes: out of memory", hdr[0]);
    rc = mw_agree(s->comm, rc, NULL);
    if (rc == MW_OK)
        rc = bcast_bytes(s->comm, &w, buf, (size_t)hdr[0]);
    mw_ckpt c;
    mw_ckpt_init(&c);
    if (rc == MW_OK)
        rc = mw_ckpt_read_buffer(&c, buf, (size_t)hdr[0], "checkpoint");
    char file[4200] = "the latest checkpoint";
    if (hdr[2] >= 0)
        snprintf(file, sizeof file, "%.4000s/ckpt-%ld", s->o->checkpoint_dir, hdr[2]);
    if (rc == MW_OK)
        rc = mw_ckpt_check_finite(&s->model, &c, file);
    if (rc == MW_OK)
        rc = mw_session_apply(s, &c, "the latest checkpoint", hdr[2], weights_only);
    mw_ckpt_free(&c);
    free(buf);
    rc = mw_agree(s->comm, rc, NULL);
    *restored = rc == MW_OK;
    return rc;
}

mw_status mw_chief_summaries(const mw_session *s, mw_summary *sum, int epoch,
                             const mw_epoch_metrics *em)
{
    if (s->rank != 0 || !s->o->summary_dir[0])
        return MW_OK;
    /* the metrics (in compile_config's order) and the throughput by their names (loss.h,
     * session.h) */
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    char keys[2][MW_METRICS_MAX][32];
    const char *names[4 + 2 * MW_METRICS_MAX];
    double v[4 + 2 * MW_METRICS_MAX];
    int n = 0;
    for (int half = 0; half < 2; half++) {
        names[n] = half ? "test/loss" : "train/loss";
        v[n++] = half ? em->test_loss : em->train_loss;
        for (int i = 0; i < ml.n; i++) {
            snprintf(keys[half][i], sizeof keys[half][i], "%s/%s", half ? "test" : "train",
                     mw_metric_key(ml.kind[i]));
            names[n] = keys[half][i];
            v[n++] = half ? em->test_metric[i] : em->train_metric[i];
        }
    }
    names[n] = mw_session_throughput(s, 1), v[n++] = em->examples_per_sec;
    names[n] = "learning_rate", v[n++] = mw_optimizer_lr(s->o, s->opt_step);
    for (int i = 0; i < n; i++)
        MW_TRY(mw_summary_scalar(sum, names[i], s->global_step, v[i]));
    MW_TRY(mw_summary_row(sum, s->global_step, epoch + 1, names, v, n));
    return mw_summary_flush(sum);
}

/* Layer l's weights (its w_count floats at w_off) to f in Keras' layout: a variable the arena
 * holds with its first two axes swapped (mw_keras_var.swap01: Gemma's query, key and value
 * kernels) goes out reordered through a copy, so the dump is Keras' model.weights for every
 * layer. The floats written, or (size_t)-1 when the copy cannot be had. */
static size_t dump_kernels(FILE *f, const mw_layer *l, const float *params)
{
    mw_keras_var v[MW_KERAS_LAYER_VARS];
    int nv = 0, swapped = 0;
    if (mw_keras_layer_vars(l, v, &nv) != MW_OK) { /* a layer no Keras file names: as held */
        mw_err_clear();
        nv = 0;
    }
    for (int j = 0; j < nv; j++)
        swapped |= v[j].swap01;
    if (!swapped)
        return fwrite(params + l->w_off, sizeof(float), l->w_count, f);
    float *w = malloc(l->w_count * sizeof *w);
    if (!w)
        return (size_t)-1;
    memcpy(w, params + l->w_off, l->w_count * sizeof *w);
    for (int j = 0; j < nv; j++)
        if (v[j].swap01 && v[j].off >= l->w_off && v[j].off + v[j].count <= l->w_off + l->w_count)
            mw_kvar_swap01(params + v[j].off, w + (v[j].off - l->w_off), v[j].shape[1],
                           v[j].shape[0], v[j].count);
    const size_t n = fwrite(w, sizeof(float), l->w_count, f);
    free(w);
    return n;
}

/* The path was checked when the flags were read (cli.c: a regular file, or a new name in a
 * writable directory); it is opened without blocking and written only when it is still a
 * regular file, not truncated before that is known. Every failure says why. */
mw_status mw_chief_dump_weights(mw_session *s, const char *path)
{
    MW_TRY(s->ops->pull(s->rep));
    MW_TRY(check_finite(s, "--dump-weights is"));
    int fd;
    const char *kind = NULL;
    const int oe = mw_fs_open_output_errno(path, &fd, &kind);
    if (oe && kind)
        return mw_err(MW_EIO, "--dump-weights %s: is %s, not a regular file: not written", path,
                      kind);
    FILE *f = oe ? NULL : fdopen(fd, "wb");
    if (!f) {
        const int e = oe ? oe : errno;
        if (!oe)
            close(fd);
        return mw_err(MW_EIO, "--dump-weights %s: cannot write it: %s", path, strerror(e));
    }
    size_t want = 0, n = 0;
    int e = 0;
    for (int i = 0; i < s->model.nlayers; i++) {
        const mw_layer *l = &s->model.layers[s->model.worder[i]]; /* Keras' order */
        const size_t w = dump_kernels(f, l, s->model.params.data);
        if (w == (size_t)-1) {
            fclose(f);
            return mw_err(MW_ENOMEM, "--dump-weights %s: out of memory reordering layer '%s'", path,
                          l->name);
        }
        n += w;
        n += fwrite(s->model.params.data + l->b_off, sizeof(float), l->b_count, f);
        n += fwrite(s->model.params.data + l->stats_off, sizeof(float), l->stats_count, f); /* BN */
        want += l->w_count + l->b_count + l->stats_count;
        if (n != want && !e)
            e = errno;
    }
    if (fflush(f) != 0 && !e)
        e = errno;
    if (fclose(f) != 0 && !e)
        e = errno;
    if (e || n != want)
        return mw_err(MW_EIO, "--dump-weights %s: cannot write it: %s", path,
                      strerror(e ? e : EIO));
    return MW_OK;
}

void mw_chief_straggler_note(char *buf, size_t len, const double *medians, int world)
{
    buf[0] = '\0';
    double *v = world > 1 ? malloc((size_t)world * sizeof *v) : NULL;
    if (!v)
        return; /* one rank, or no memory for a note */
    memcpy(v, medians, (size_t)world * sizeof *v);
    const double mid = mw_median(v, world);
    free(v);
    int slow = 0;
    for (int r = 1; r < world; r++)
        if (medians[r] > medians[slow])
            slow = r;
    if (mid > 0 && medians[slow] > MW_STRAGGLER_RATIO * mid)
        snprintf(buf, len,
                 ", straggler: rank %d's median step (without the all-reduce) %.1f ms, %.0f%% "
                 "slower than the median rank's %.1f ms",
                 slow, 1e3 * medians[slow], 100 * (medians[slow] / mid - 1), 1e3 * mid);
}

/* ---- the evaluator task's link (the protocol: worker/evaluator.h) ---- */

void mw_evlink_init(mw_evlink *l, const mw_topology *topo, double timeout)
{
    l->rank = topo->ntrain < topo->world_size ? topo->ntrain : -1;
    l->world = topo->world;
    l->timeout = timeout;
    l->buf = NULL;
    l->hdr[0] = l->hdr[1] = 0;
    l->req[0] = l->req[1] = MPI_REQUEST_NULL;
}

/* Wait until the evaluator has taken the previous message. */
static mw_status evlink_wait(mw_evlink *l, long step)
{
    if (l->req[0] == MPI_REQUEST_NULL && l->req[1] == MPI_REQUEST_NULL)
        return MW_OK;
    mw_wait_ctx w = {"sending a checkpoint to the evaluator", step, l->timeout};
    int peers[2] = {l->rank, l->rank};
    MW_TRY(mw_comm_wait(&w, l->req, 2, peers));
    free(l->buf);
    l->buf = NULL;
    return MW_OK;
}

/* Send the header {number, nbytes} and the bytes (owned from here on). */
static mw_status evlink_post(mw_evlink *l, long number, void *bytes, size_t nbytes, long step)
{
    mw_status rc = evlink_wait(l, step);
    if (rc == MW_OK && nbytes > (size_t)INT_MAX)
        rc = mw_err(MW_EINTERNAL, "checkpoint of %zu bytes: too large to send", nbytes);
    if (rc != MW_OK) {
        free(bytes);
        return rc;
    }
    l->buf = bytes;
    l->hdr[0] = number, l->hdr[1] = (long)nbytes;
    MW_MPI(MPI_Isend(l->hdr, 2, MPI_LONG, l->rank, MW_EV_TAG_HDR, l->world, &l->req[0]),
           "sending to the evaluator");
    MW_MPI(MPI_Isend(bytes ? bytes : l->hdr, (int)nbytes, MPI_BYTE, l->rank, MW_EV_TAG_DATA,
                     l->world, &l->req[1]),
           "sending to the evaluator");
    return MW_OK;
}

mw_status mw_evlink_send(mw_evlink *l, long number, void *bytes, size_t nbytes, long step)
{
    return evlink_post(l, number, bytes, nbytes, step);
}

mw_status mw_evlink_finish(mw_evlink *l, long step)
{
    if (l->rank < 0)
        return MW_OK;
    MW_TRY(evlink_post(l, -1, NULL, 0, step));
    return evlink_wait(l, step);
}

mw_status mw_evlink_preempted(mw_evlink *l, long step)
{
    if (l->rank < 0)
        return MW_OK;
    MW_TRY(evlink_post(l, -2, NULL, 0, step));
    return evlink_wait(l, step);
}

void mw_evlink_free(mw_evlink *l)
{
    free(l->buf);
    l->buf = NULL;
}
