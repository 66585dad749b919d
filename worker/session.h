/* One process's part of a run, shared by `train`, `eval`, `export` and the evaluator
 * task: options, model, host state, data, and the replica backend that computes.
 *
 *     mw_session_init(&s);
 *     mw_chief_fetch_model(&s, o, comm);   optional: the checkpoint's model (chief.h)
 *     mw_session_open(&s, o, topo, use);   local set-up only: agree on it afterwards
 *     ...
 *     mw_session_close(&s, abandoned);
 *
 * The host arenas (model.params, m1, m2, m3) and the counters below are what a checkpoint
 * holds; the backend's copies follow them through ops->push and ops->pull. */
#ifndef MW_WORKER_SESSION_H
#define MW_WORKER_SESSION_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/topology.h"
#include "common/arena.h"
#include "common/status.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_pack.h"
#include "worker/data/data.h"
#include "worker/model/model.h"
#include "worker/opts.h"
#include "worker/replicas/device.h"
#include "worker/replicas/replicas.h"
#include "worker/shard_plan.h"

/* One epoch's results, as the chief prints and records them. */
typedef struct {
    double train_loss, test_loss;
    double train_metric[MW_METRICS_MAX], test_metric[MW_METRICS_MAX]; /* mw_loss_metrics' */
    double examples_per_sec, seconds;
} mw_epoch_metrics;

typedef enum {
    MW_USE_TRAIN,     /* a training rank */
    MW_USE_EVAL,      /* `mwtrain eval`: evaluates, never trains */
    MW_USE_EXPORT,    /* `mwtrain export`: model and weights only; no data, no device */
    MW_USE_EVALUATOR, /* the evaluator task: evaluates alone (a world of one) */
} mw_session_use;

typedef struct {
    mw_train_opts opts;     /* the caller's, with replicas_per_worker resolved */
    const mw_train_opts *o; /* points at opts */
    const mw_topology *topo;
    MPI_Comm comm;   /* the training communicator, or MPI_COMM_SELF for the evaluator */
    int rank, world; /* in comm */
    mw_model model;
    mw_arena m1, m2, m3; /* optimizer slots s1..s3 (kernels/optim.h) */
    mw_dataset train, test;
    mw_shard_plan plan; /* --shard-policy file: the epoch order's plan (plan.ids NULL: none) */
    mw_device_choice dev;
    mw_session_use use;
    int shape[4]; /* the data's h, w, c and classes the model was built for (0: the file's) */
    const mw_replicas_ops *ops; /* NULL for export */
    mw_replicas *rep;
    /* the training state a checkpoint carries */
    long opt_step;          /* optimizer updates done (Adam's t) */
    int start_epoch;        /* first epoch to run (0, or from a checkpoint) */
    long start_step;        /* steps of start_epoch already done */
    long global_step;       /* steps done in all */
    long saved_step;        /* global_step of the last checkpoint, -1 when none */
    uint64_t seed;          /* shuffle seed: the flag's, or the checkpoint's */
    const char *model_json; /* the model description every checkpoint carries (borrowed) */
    /* the chief's checkpoint hand-off: without --model, the latest checkpoint, read once for
     * its model (chief.h) */
    struct {
        char *model; /* its model text (owned) */
        void *bytes; /* rank 0: its bytes, until the restore takes them (owned) */
        size_t len;
        long number; /* rank 0: its N (ckpt-N) */
    } latest;
    /* a weights-only restore that found optimizer slots: their optimizer ("adam", "sgd"; ""
     * when none), the slots in m1/m2 and opt_step (export writes them for Keras) */
    char saved_optimizer[16];
    /* mixed_float16's dynamic loss scale (0: no loss scaling) and the finite steps since it
     * last changed; a checkpoint carries both */
    double loss_scale;
    long loss_scale_steps;
} mw_session;

void mw_session_init(mw_session *s);
/* The local half of set-up: device, threads, data, model, initial weights, the backend's
 * open. Talks to no other rank; failures are for the caller to agree on. */
mw_status mw_session_open(mw_session *s, const mw_train_opts *o, const mw_topology *topo,
                          mw_session_use use);
/* The global batch: batch per replica x replicas per worker x ranks. */
long mw_session_global_batch(const mw_session *s);
/* The examples an epoch trains on: the training set's, or fewer under --shard-policy file
 * (shard_plan.h). */
long mw_session_epoch_examples(const mw_session *s);
/* Take over a checkpoint's state (every rank runs this on the same bytes): the parameters
 * and counters; without weights_only the optimizer state too, refused when the optimizer
 * differs or a mid-epoch checkpoint had another global batch. Pushes it to the backend.
 * name names the checkpoint in messages, number is its N (ckpt-N).
 *
 * With --model, the model saved in the checkpoint is rebuilt (for the same data shape) and
 * must compute what --model computes (mw_model_diff), else MW_ECKPT "--resume: --model FILE
 * differs from the model saved in ckpt-N: <the first difference>; ..." (eval, export and
 * the evaluator say so in their own words). A checkpoint without a model description (an
 * older one) is checked by its parameter count only, with a warning. */
mw_status mw_session_apply(mw_session *s, const mw_ckpt *c, const char *name, long number,
                           int weights_only);
/* Forward over the test set (or its first --test-examples), sharded over every replica of
 * comm; the mean loss and the loss's metrics (the accuracy, MAE, AUC, ...: mw_metrics_value,
 * MW_METRICS_MAX values), reduced over comm under --collective-timeout. */
mw_status mw_session_evaluate(mw_session *s, double *loss, double *metric);
/* The throughput's name: "Tokens/s" for a model of token sequences (an Embedding first),
 * "Images/s" for an image model, else "Examples/s"; key 1: metrics.csv's and TensorBoard's
 * "tokens_per_sec", "images_per_sec" / "examples_per_sec". */
const char *mw_session_throughput(const mw_session *s, int key);
/* What one example counts for in the throughput: a token model's sequence length, else 1. */
long mw_session_positions(const mw_session *s);
/* "<prefix><Label>: <value>" of each of the loss's metrics (v: mw_loss_metrics' values), as
 * the epoch line prints them, joined by ", " (accuracies in percent with 2 decimals, the
 * others with 4): "Test Accuracy: 91.20", "MAE: 0.1234, RMSE: 0.2000"; only the first when
 * first_only. */
void mw_session_metric_text(const mw_session *s, char *out, size_t cap, const char *prefix,
                            const double *v, int first_only);
/* abandoned: a peer may be gone (the job is being aborted): skip what would wait for it. */
void mw_session_close(mw_session *s, int abandoned);

#endif
