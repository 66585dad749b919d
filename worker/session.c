/* The session's set-up, evaluation and tear-down; see session.h. */
#include "worker/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster/comm.h"
#include "common/log.h"
#include "common/sysmem.h"
#include "worker/data/preprocess.h"
#include "worker/keras/compile.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_loss.h"
#include "worker/memory.h"
#include "worker/optimizers.h"

void mw_session_init(mw_session *s)
{
    memset(s, 0, sizeof *s);
    mw_dataset_init(&s->train);
    mw_dataset_init(&s->test);
    mw_arena_init(&s->m1);
    mw_arena_init(&s->m2);
    mw_arena_init(&s->m3);
    s->comm = MPI_COMM_NULL;
    s->saved_step = -1;
    s->model_json = "";
}

/* --device: this rank's share of its node's GPUs, or the CPU; the decision's line on the
 * first rank; replicas per worker resolved (one per GPU by default, as MirroredStrategy;
 * one on the CPU; on GPUs an equal number per device). */
static mw_status choose_device(mw_session *s, mw_session_use use)
{
    const mw_topology *topo = s->topo;
    mw_train_opts *o = &s->opts;
    if (use == MW_USE_EXPORT) /* export reads a checkpoint and writes a file: no device */
        MW_TRY(mw_device_select_with("cpu", NULL, 0, 1, &s->dev));
    else
        MW_TRY(mw_device_select(mw_opts_device_for(o, topo->is_evaluator), topo->local_rank,
                                topo->local_size > 0 ? topo->local_size : 1, &s->dev));
    if (topo->rank == 0 && use != MW_USE_EXPORT && s->dev.why[0]) {
        if (s->dev.warn)
            mw_log_warn("%s", s->dev.why);
        else
            mw_log_info("%s", s->dev.why);
    }
    const int ndev = s->dev.n;
    if (o->replicas_per_worker <= 0)
        o->replicas_per_worker = s->dev.use_gpu ? ndev : 1;
    else if (s->dev.use_gpu && o->replicas_per_worker % ndev != 0)
        return mw_err(MW_EINVAL,
                      "--replicas-per-worker %d: this rank drives %d GPUs (CUDA "
                      "devices %d..%d) and each runs the same number of replicas: give a "
                      "multiple of %d, or leave the flag out for one replica per GPU",
                      o->replicas_per_worker, ndev, s->dev.first, s->dev.first + ndev - 1, ndev);
    return MW_OK;
}

/* Compute threads of this rank: --threads, or the node's cores shared among its ranks; no
 * more than the examples of a replica; one for a device, which runs micro-batches in turn. */
static int threads_for(const mw_session *s)
{
    const mw_train_opts *o = s->o;
    const int local = s->topo->local_size > 0 ? s->topo->local_size : 1;
    int threads = o->threads > 0 ? o->threads : mw_sys_cpus(NULL) / local;
    if (threads < 1)
        threads = 1;
    if (threads > o->batch_per_replica)
        threads = o->batch_per_replica;
    return s->dev.use_gpu ? 1 : threads;
}

/* The built-in tutorial CNN for data of another shape: its JSON with the input shape
 * (None, h, w, c) and the last Dense's units = n. Owned text, or NULL when out of memory. */
static char *tutorial_for(int h, int w, int c, int n)
{
    json_t *root = json_loadb(mw_keras_tutorial_json, mw_keras_tutorial_json_nbytes, 0, NULL);
    json_t *layers = json_object_get(json_object_get(root, "config"), "layers");
    char *text = NULL;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *cfg = json_object_get(json_array_get(layers, i), "config");
        if (json_object_get(cfg, "batch_input_shape"))
            json_object_set_new(cfg, "batch_input_shape",
                                json_pack("[n,i,i,i]", h, w, c)); /* NULL: keeps a valid JSON */
        if (i + 1 == json_array_size(layers))
            json_object_set_new(cfg, "units", json_integer(n));
    }
    if (layers)
        text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* A model that does not fit the data: the loader's message (it names the model's file and
 * the mismatch), and which data the model was checked against. */
static mw_status model_mismatch(const mw_session *s, mw_status rc)
{
    if (rc != MW_EMODEL || !s->shape[0])
        return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mw_err_msg());
    mw_err_clear();
    if (s->shape[0] == 1 && s->shape[1] == 1) /* (N, F): features or token ids */
        return mw_err(rc, "%s (the data: %s, %d values per example, %d classes)", msg,
                      s->o->data_dir, s->shape[2], s->shape[3]);
    return mw_err(rc, "%s (the data: %s, %dx%dx%d images, %d classes)", msg, s->o->data_dir,
                  s->shape[0], s->shape[1], s->shape[2], s->shape[3]);
}

/* The model's last layer, as a Keras user names it, and whether it is a sigmoid or the folded
 * softmax. */
static const mw_layer *last_shown(const mw_model *m)
{
    const mw_layer *l = &m->layers[m->nlayers - 1];
    while (l->folded && l > m->layers)
        l--;
    return l;
}

/* The loss against the output's activation: from_logits=False wants the activation that
 * makes probabilities, from_logits=True a linear output (Keras would apply it twice). The
 * default loss takes either, as it always has. */
static mw_status check_activation(const mw_session *s)
{
    const mw_model *m = &s->model;
    const mw_loss *ls = &m->loss;
    const mw_layer *l = &m->layers[m->nlayers - 1];
    const int softmax = l->softmax, sigmoid = l->kind == MW_LAYER_ACT && l->act == MW_ACTK_SIGMOID;
    const mw_loss_out want = mw_loss_wants(ls);
    const char *cls = mw_loss_row(ls->kind)->keras, *from = s->o->loss_from;
    if (!from[0])
        return MW_OK;
    const int missing =
        (want == MW_LOSS_OUT_SOFTMAX && !softmax) || (want == MW_LOSS_OUT_SIGMOID && !sigmoid);
    const char *act = want == MW_LOSS_OUT_SOFTMAX ? "softmax" : "sigmoid";
    if (missing)
        return mw_err(MW_EMODEL,
                      "%s: %s(from_logits=False) wants probabilities, but the model's output "
                      "(layer '%s') has no %s; end it with activation=\"%s\", or use "
                      "from_logits=True",
                      from, cls, last_shown(m)->name, act, act);
    if (mw_loss_row(ls->kind)->has_logits && ls->d.from_logits && (softmax || sigmoid))
        return mw_err(MW_EMODEL,
                      "%s: %s(from_logits=True) wants logits, but the model's output (layer "
                      "'%s') ends in a %s; remove the activation, or use from_logits=False",
                      from, cls, last_shown(m)->name, softmax ? "softmax" : "sigmoid");
    return MW_OK;
}

/* A model whose output is a sequence (None, T, C) has a loss per position: the data's labels
 * (N, T), the sparse loss; and labels per position need such a model. */
static mw_status check_positions(mw_session *s, const char *from)
{
    const mw_model *m = &s->model;
    const mw_layer *last = &m->layers[m->nlayers - 1];
    const int T = last->out_h == 1 && last->out_w > 1 && !last->flat ? last->out_w : 1;
    const int W = s->train.targets ? 1 : s->train.label_width > 1 ? s->train.label_width : 1;
    if (T != W && T == 1)
        return mw_err(MW_EDATA,
                      "%s: labels (N, %d), one per position, but the model's output (layer '%s') "
                      "is (None, %d); a model of labels per position ends in a Dense on each "
                      "position: (None, %d, classes)",
                      s->o->data_dir, W, last_shown(m)->name, last->out_c, W);
    if (T != W)
        return mw_err(MW_EDATA,
                      "%s: %d label(s) per example, but the model's output (layer '%s') is "
                      "(None, %d, %d), one per position; expected labels (N, %d)",
                      s->o->data_dir, W, last_shown(m)->name, T, last->out_c, T);
    if (T > 1 && m->loss.kind != MW_LOSS_SPARSE_XENT)
        return mw_err(MW_EUNSUPPORTED,
                      "%s: a loss per position is SparseCategoricalCrossentropy, for now; the "
                      "model's output is a sequence (layer '%s')",
                      from, last_shown(m)->name);
    if (T > 1 && (last->out_c < s->train.num_classes ||
                  (s->o->classes > 0 && last->out_c != s->train.num_classes)))
        return mw_err(MW_EMODEL,
                      "%s: the model's output has %d units per position (layer '%s') but %s has "
                      "%d classes; expected a last Dense(%d)%s",
                      from, last->out_c, last_shown(m)->name, s->o->data_dir, s->train.num_classes,
                      s->train.num_classes,
                      s->o->classes > 0 ? " (--classes)" : " or wider (a vocabulary)");
    if (T > 1) /* the model's vocabulary: the labels are below it */
        s->train.num_classes = s->test.num_classes = last->out_c;
    return MW_OK;
}

/* Beside ignore_class the model says how many classes there are: its output must have a unit
 * for every other label (and match --classes when given); the ignore label is a class of the
 * model's when below its width (Keras' ignore_class=0 for padding), else none. */
static mw_status check_ignore_width(mw_session *s, const char *from)
{
    const mw_model *m = &s->model;
    const int width = m->layers[m->nlayers - 1].out_c, nc = s->train.num_classes;
    if (width < nc || (s->o->classes > 0 && width != nc))
        return mw_err(MW_EMODEL,
                      "%s: the model's output has %d units (layer '%s') but %s has %d classes "
                      "(labels other than ignore_class %d); expected a last Dense(%d)%s",
                      from, width, last_shown(m)->name, s->o->data_dir, nc,
                      (int)m->loss.ignore_class, nc, s->o->classes > 0 ? " (--classes)" : "");
    s->train.num_classes = s->test.num_classes = width;
    return MW_OK;
}

/* The loss (o->loss) set on the model and checked against the data's targets and the
 * model's output; integer labels become float targets for a loss that takes floats. */
static mw_status check_loss(mw_session *s)
{
    mw_model *m = &s->model;
    mw_loss_accuracy_by_shape(&m->loss, m->layers[m->nlayers - 1].out_c);
    const mw_loss_ops *row = mw_loss_row(m->loss.kind);
    const char *from = s->o->loss_from[0] ? s->o->loss_from : "the default loss";
    /* the loss chosen for data it does not fit: a configuration error (exit 2), as the output's
     * width against the targets below; the data itself is sound */
    if (m->loss.kind == MW_LOSS_CCE && !s->train.targets)
        return mw_err(MW_ECONFIG,
                      "%s: CategoricalCrossentropy takes one-hot (or soft) float32 targets "
                      "(N, K), but %s has integer class labels; use "
                      "SparseCategoricalCrossentropy for labels",
                      from, s->o->data_dir);
    if (!row->dense && s->train.targets)
        return mw_err(MW_ECONFIG,
                      "%s: %s takes integer class labels, but %s has float32 targets (%d per "
                      "example); use CategoricalCrossentropy (one-hot targets), "
                      "BinaryCrossentropy or a regression loss (--loss, --loss-config)",
                      from, row->keras, s->o->data_dir, s->train.target_width);
    MW_TRY(check_positions(s, from));
    if (!row->dense && m->loss.has_ignore)
        MW_TRY(check_ignore_width(s, from));
    if (row->dense) {
        MW_TRY(mw_dataset_labels_as_targets(&s->train, s->o->data_dir));
        MW_TRY(mw_dataset_labels_as_targets(&s->test, s->o->data_dir));
        const int width = m->layers[m->nlayers - 1].out_c; /* m->nclasses once finalized */
        if (width != s->train.target_width)
            return mw_err(MW_EMODEL,
                          "%s: %s: the model's output has %d units (layer '%s') but %s has %d "
                          "target value(s) per example; expected a last Dense(%d)%s",
                          from, row->keras, width, last_shown(m)->name, s->o->data_dir,
                          s->train.target_width, s->train.target_width,
                          m->loss.kind == MW_LOSS_CCE && s->train.target_width == 1
                              ? " (CategoricalCrossentropy takes one-hot targets (N, K); "
                                "integer labels go with SparseCategoricalCrossentropy)"
                              : "");
        if (s->test.count && s->test.target_width != s->train.target_width)
            return mw_err(MW_EDATA,
                          "%s: the test targets have %d value(s) per example, the "
                          "training targets %d",
                          s->o->data_dir, s->test.target_width, s->train.target_width);
    }
    return check_activation(s);
}

/* A model that starts with an Embedding reads token ids: the data must hold integer ids
 * (N, T), each below its input_dim (the first one that is not names the example and the
 * position). */
static mw_status check_tokens(mw_session *s)
{
    const mw_model *m = &s->model;
    const mw_layer *e = &m->layers[0];
    if (m->nlayers == 0 || e->kind != MW_LAYER_EMBED)
        return MW_OK;
    const mw_dataset *sets[2] = {&s->train, &s->test};
    const char *names[2] = {"training", "test"};
    for (int i = 0; i < 2; i++) {
        uint32_t ex = 0, pos = 0;
        int64_t v = 0;
        if (sets[i]->count && sets[i]->type != MW_IMAGES_TOKENS)
            return mw_err(MW_EDATA,
                          "%s: the %s set holds %s, but the model's first layer '%s' "
                          "(Embedding) reads integer token ids (N, T)",
                          s->o->data_dir, names[i],
                          sets[i]->type == MW_IMAGES_F32 ? "float32 values" : "uint8 images",
                          e->name);
        if (mw_dataset_find_token(sets[i], e->pad[0], &ex, &pos, &v))
            return mw_err(MW_EDATA,
                          "%s: %s example %u has token id %lld at position %u; the model's "
                          "Embedding '%s' has input_dim %d (ids 0..%d)",
                          s->o->data_dir, names[i], ex, (long long)v, pos, e->name, e->pad[0],
                          e->pad[0] - 1);
    }
    return MW_OK;
}

/* The run's loss, final before the data are read (an ignore_class label is no class):
 * without a loss flag or an archive's, the checkpoint's model carries the loss trained; then
 * --metrics over its metrics. */
static mw_status settle_loss(mw_session *s)
{
    int found = 0;
    if (!s->o->model_path && s->latest.model && !s->opts.loss_from[0])
        MW_TRY(mw_keras_source_loss(s->latest.model, &s->opts.loss,
                                    "the model saved in the checkpoint", &found));
    if (found)
        snprintf(s->opts.loss_from, sizeof s->opts.loss_from, "the loss saved in the checkpoint");
    return mw_metrics_resolve(&s->opts);
}

/* The model: --model, else the checkpoint's, else the tutorial CNN (for the data's shape and
 * classes); export needs no data (the file's own input shape). */
static mw_status build_model(mw_session *s, int with_data)
{
    const mw_train_opts *o = s->o;
    const int h = with_data ? (int)s->train.rows : 0, w = with_data ? (int)s->train.cols : 0;
    const int c = with_data ? (int)s->train.channels : 0;
    const int dense = mw_loss_row(o->loss.kind)->dense;
    /* the output's width the data want: the classes, or the targets' values per example */
    const int n = !with_data         ? 0
                  : !dense           ? s->train.num_classes
                  : s->train.targets ? s->train.target_width
                                     : 1;
    s->shape[0] = h, s->shape[1] = w, s->shape[2] = c, s->shape[3] = n;
    mw_keras_weights kw; /* a .keras archive's initial weights */
    mw_keras_weights_init(&kw);
    mw_status rc;
    /* a dense loss's width, and one beside ignore_class, is checked with the loss (check_loss) */
    const int nc = dense || o->loss.has_ignore || (with_data && s->train.label_width > 1) ? 0 : n;
    if (o->model_path) {
        rc = mw_keras_model_load(&s->model, o->model_path, h, w, c, nc, &kw);
    } else if (s->latest.model) {
        rc = mw_keras_load(&s->model, s->latest.model, strlen(s->latest.model),
                           "the model saved in the checkpoint", h, w, c, nc);
    } else if (!with_data || (h == 28 && w == 28 && c == 1 && n == 10)) {
        rc = mw_keras_build_tutorial(&s->model, 28, 28, 1, 10);
    } else {
        char *text = tutorial_for(h, w, c, n);
        rc = text ? mw_keras_load(&s->model, text, strlen(text),
                                  "built-in model (worker/models/tutorial_cnn.json)", h, w, c, n)
                  : mw_err(MW_ENOMEM, "out of memory");
        free(text);
    }
    rc = model_mismatch(s, rc);
    s->model.loss = o->loss; /* (finalize: a final softmax is Keras' from_logits=False) */
    if (rc == MW_OK && with_data)
        rc = check_loss(s);
    if (rc == MW_OK && with_data)
        rc = check_tokens(s);
    mw_policy policy;
    if (rc == MW_OK && o->dtype_policy && mw_policy_parse(o->dtype_policy, &policy) == 0)
        mw_model_set_policy(&s->model, policy); /* over the model's own */
    if (rc == MW_OK)
        rc = mw_model_finalize(&s->model, (size_t)s->world * MW_ARENA_ALIGN);
    if (rc == MW_OK && with_data) /* the examples or positions the loss ignores */
        rc = mw_dataset_set_mask(&s->train, s->model.loss.has_ignore, s->model.loss.ignore_class,
                                 s->model.loss.masked, "the training set");
    if (rc == MW_OK && with_data)
        rc = mw_dataset_set_mask(&s->test, s->model.loss.has_ignore, s->model.loss.ignore_class,
                                 s->model.loss.masked, "the test set");
    if (rc == MW_OK) /* the loss travels in every checkpoint with the model */
        rc = mw_keras_source_set_loss(&s->model);
    if (rc == MW_OK) /* Keras' initializers, then an archive's weights over them */
        mw_model_init_params(&s->model, s->o->seed);
    if (rc == MW_OK)
        rc = mw_keras_weights_apply(&kw, &s->model, s->model.params.data);
    mw_keras_weights_free(&kw);
    MW_TRY(rc);
    if (s->model.source) /* the model description travels in every checkpoint */
        s->model_json = s->model.source;
    mw_arena *as[3] = {&s->m1, &s->m2, &s->m3};
    for (int i = 0; i < 3; i++) {
        mw_arena_reserve(as[i], s->model.params.count);
        MW_TRY(mw_arena_alloc(as[i]));
    }
    mw_optimizer_init_slots(s->o, s->m1.data, s->m2.data, s->m3.data, s->model.params.count);
    if (mw_model_policy(&s->model) == MW_POLICY_MIXED_FLOAT16) /* Keras' LossScaleOptimizer */
        s->loss_scale = s->o->loss_scale_initial, s->loss_scale_steps = 0;
    return MW_OK;
}

/* Refuse, before the backend allocates, a run that would not fit in what this process may
 * use (worker/memory.h); mem was read before the data and the model took their share. */
static mw_status check_memory(const mw_session *s, const mw_sysmem *mem, int nthreads)
{
    mw_memory_estimate e;
    mw_memory_estimate_run(&e, &s->model, &s->train, &s->test, s->o, nthreads, s->dev.use_gpu);
    const int local = s->topo->local_size > 0 ? s->topo->local_size : 1;
    if (s->rank == 0) {
        char line[1536];
        mw_log_debug("%s", mw_memory_describe(&e, mem, local, line, sizeof line));
    }
    return mw_memory_check(&e, mem, local, s->o);
}

mw_status mw_session_open(mw_session *s, const mw_train_opts *o, const mw_topology *topo,
                          mw_session_use use)
{
    s->opts = *o;
    s->o = &s->opts;
    s->topo = topo;
    s->use = use;
    s->seed = o->seed;
    if (use == MW_USE_EVALUATOR) /* it evaluates alone */
        s->comm = MPI_COMM_SELF, s->rank = 0, s->world = 1;
    else
        s->comm = topo->train, s->rank = topo->rank, s->world = topo->ntrain;
    MW_TRY(choose_device(s, use));
    const int with_data = use != MW_USE_EXPORT;
    mw_sysmem mem; /* read before the data and the model are in memory */
    const int check = with_data && mw_memory_check_enabled() && mw_sysmem_query(&mem);
    const mw_data_opts dopts = {.classes = o->classes,
                                .cifar_fine = o->cifar_label == 0,
                                .sequence_length = o->sequence_length};
    /* the node's ranks load the same files at once: each reader checks its share */
    mw_sysmem_set_share(topo->local_size > 0 ? topo->local_size : 1);
    MW_TRY(settle_loss(s));
    if (with_data)
        MW_TRY(mw_dataset_open(&s->train, &s->test, o->data_dir, &dopts));
    if (with_data && s->opts.loss.has_ignore && o->classes <= 0) /* 255 beside 0..9: no class */
        mw_dataset_classes_without(&s->train, &s->test, s->opts.loss.ignore_class);
    char note[1024];
    if (with_data && use == MW_USE_TRAIN && s->rank == 0 && o->sequence_length <= 0 && /* bytes */
        mw_dataset_unseen_classes(&s->train, &s->test, o->data_dir, o->classes > 0, note,
                                  sizeof note) > 0)
        mw_log_warn("%s", note);
    MW_TRY(build_model(s, with_data));
    if (use == MW_USE_EXPORT)
        return MW_OK;
    /* the model's input pipeline: random layers act on the training set only */
    s->train.pre = s->test.pre = s->model.pre;
    s->train.augment = use == MW_USE_TRAIN;
    s->train.aug_seed = s->seed;
    const int nthreads = threads_for(s);
    if (check)
        MW_TRY(check_memory(s, &mem, nthreads));
    s->ops = s->dev.use_gpu ? s->dev.module->replicas : &mw_replicas_cpu;
    const mw_replicas_env env = {
        .o = s->o,
        .topo = topo,
        .comm = s->comm,
        .rank = s->rank,
        .world = s->world,
        .model = &s->model,
        .m1 = &s->m1,
        .m2 = &s->m2,
        .m3 = &s->m3,
        .nthreads = nthreads,
        .first_device = s->dev.first,
        .ndevices = s->dev.n,
    };
    return s->ops->open(&s->rep, &env);
}

long mw_session_positions(const mw_session *s)
{
    const mw_model *m = &s->model;
    return m->nlayers > 0 && m->layers[0].kind == MW_LAYER_EMBED ? m->layers[0].out_w : 1;
}

const char *mw_session_throughput(const mw_session *s, int key)
{
    const int images = s->model.in_h > 1 || s->model.in_w > 1;
    if (mw_session_positions(s) > 1)
        return key ? "tokens_per_sec" : "Tokens/s";
    if (key)
        return images ? "images_per_sec" : "examples_per_sec";
    return images ? "Images/s" : "Examples/s";
}

void mw_session_metric_text(const mw_session *s, char *out, size_t cap, const char *prefix,
                            const double *v, int first_only)
{
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < ml.n && at < cap && (i == 0 || !first_only); i++) {
        const int pct = mw_metric_percent(ml.kind[i]);
        const int w =
            snprintf(out + at, cap - at, pct ? "%s%s%s: %.2f" : "%s%s%s: %.4f", i ? ", " : "",
                     prefix, mw_metric_label(ml.kind[i]), pct ? 100 * v[i] : v[i]);
        at += w > 0 ? (size_t)w : 0;
    }
}

long mw_session_global_batch(const mw_session *s)
{
    return (long)s->o->batch_per_replica * s->o->replicas_per_worker * s->world;
}

/* What restores with --model: the prefix of its messages and the way out of a mismatch. */
static void model_context(const mw_session *s, const char **who, const char **fix)
{
    switch (s->use) {
    case MW_USE_TRAIN:
        *who = "--resume";
        *fix = "resume without --model to use the saved model, or start a new --checkpoint-dir";
        return;
    case MW_USE_EVALUATOR:
        *who = "evaluator";
        *fix = "give the evaluator the --model the training tasks use";
        return;
    default:
        *who = s->use == MW_USE_EVAL ? "eval" : "export";
        *fix = "leave out --model to use the saved model";
        return;
    }
}

/* With --model: the checkpoint's own model (c->model_json, rebuilt for the same data shape)
 * must compute what the session's does. Every rank decides alike from the same bytes. */
static mw_status check_saved_model(mw_session *s, const mw_ckpt *c, long number)
{
    const char *path = s->o->model_path, *who, *fix;
    if (!path)
        return MW_OK; /* the model came from the checkpoint, or both are the built-in one */
    model_context(s, &who, &fix);
    char ck[32] = "the checkpoint";
    if (number >= 0)
        snprintf(ck, sizeof ck, "ckpt-%ld", number);
    if (!c->model_json || !c->model_json[0]) {
        if (s->rank == 0)
            mw_log_warn("%s: %s carries no model description (an older checkpoint): --model %s "
                        "could not be compared with the model it was saved from, only its "
                        "parameter count",
                        who, ck, path);
        return MW_OK;
    }
    if (s->model.source && !strcmp(s->model.source, c->model_json))
        return MW_OK; /* the same text */
    char origin[64], what[1024];
    snprintf(origin, sizeof origin, "the model saved in %s", ck);
    mw_model saved;
    const int *sh = s->shape;
    int differ = 1;
    mw_status rc = mw_keras_load(&saved, c->model_json, strlen(c->model_json), origin, sh[0], sh[1],
                                 sh[2], sh[3]);
    if (rc == MW_ENOMEM)
        return rc;
    if (rc != MW_OK) {
        snprintf(what, sizeof what, "the saved model does not fit here: %s", mw_err_msg());
        mw_err_clear();
    } else {
        differ = mw_model_diff(&saved, &s->model, what, sizeof what) ||
                 mw_preprocess_diff(saved.pre, s->model.pre, what, sizeof what);
    }
    mw_model_free(&saved);
    if (!differ)
        return MW_OK;
    return mw_err(MW_ECKPT, "%s: --model %s differs from the model saved in %s: %s; %s", who, path,
                  ck, what, fix);
}

mw_status mw_session_apply(mw_session *s, const mw_ckpt *c, const char *name, long number,
                           int weights_only)
{
    const mw_train_opts *o = s->o;
    const long gb = mw_session_global_batch(s);
    if (c->nparams != s->model.nparams)
        return mw_err(MW_ECKPT, "%s holds %zu parameters; the model has %zu (another model?)", name,
                      c->nparams, s->model.nparams);
    MW_TRY(check_saved_model(s, c, number));
    if (weights_only) {
        mw_ckpt_unpack(&s->model, s->model.params.data, c->params);
        if (c->slot1 && c->nslots == c->nparams) { /* kept for export (its Keras optimizer) */
            mw_ckpt_unpack(&s->model, s->m1.data, c->slot1);
            if (c->slot2)
                mw_ckpt_unpack(&s->model, s->m2.data, c->slot2);
            snprintf(s->saved_optimizer, sizeof s->saved_optimizer, "%s", c->optimizer);
            s->opt_step = c->opt_step;
        }
        s->start_epoch = c->epoch;
        s->global_step = c->global_step;
        return s->ops ? s->ops->push(s->rep, 1) : MW_OK;
    }
    if (strcmp(c->optimizer, mw_opts_optimizer_name(o)) != 0)
        return mw_err(MW_ECKPT, "%s was written with --optimizer %s; this run uses %s", name,
                      c->optimizer, mw_opts_optimizer_name(o));
    if (c->step_in_epoch > 0 && c->global_batch != gb)
        return mw_err(MW_ECKPT,
                      "%s was saved in the middle of an epoch with a global batch of %ld; this "
                      "run's global batch is %ld (batch per replica x replicas): use the same "
                      "global batch, or resume from an epoch-boundary checkpoint",
                      name, c->global_batch, gb);
    const int need = mw_optimizer_slots(o);
    float *const slots[3] = {c->slot1, c->slot2, c->slot3};
    if (c->nslots != c->nparams || !slots[need - 1])
        return mw_err(MW_ECKPT, "%s has no optimizer state for %s%s (%d slot(s) needed)", name,
                      mw_opts_optimizer_name(o), o->amsgrad ? " with amsgrad" : "", need);
    mw_ckpt_unpack(&s->model, s->model.params.data, c->params);
    mw_arena *arenas[3] = {&s->m1, &s->m2, &s->m3};
    for (int i = 0; i < 3; i++)
        if (slots[i])
            mw_ckpt_unpack(&s->model, arenas[i]->data, slots[i]);
    s->opt_step = c->opt_step;
    if (s->loss_scale > 0 && c->has_loss_scale) /* else the run starts its own scaling */
        s->loss_scale = c->loss_scale, s->loss_scale_steps = c->loss_scale_steps;
    /* SGD counted no iterations before schedules existed: its steps are the global steps */
    const int k = mw_optimizer_find(c->optimizer, 0);
    if (k >= 0 && mw_optimizer_row_of((mw_optimizer)k)->legacy_steps && c->opt_step == 0)
        s->opt_step = c->global_step;
    s->start_epoch = c->epoch;
    s->start_step = c->step_in_epoch;
    s->global_step = c->global_step;
    s->saved_step = c->global_step;
    s->seed = c->seed;
    return s->ops ? s->ops->push(s->rep, 0) : MW_OK;
}

mw_status mw_session_evaluate(mw_session *s, double *loss, double *metric)
{
    long ntest = s->test.count;
    if (s->o->test_examples > 0 && s->o->test_examples < ntest)
        ntest = s->o->test_examples;
    double sums[MW_SUMS] = {0};                            /* kernels.h' MW_SUM_* */
    mw_dataset_mask_batches(&s->test, NULL, ntest, ntest); /* a masked loss: one batch */
    MW_TRY(s->ops->evaluate(s->rep, &s->test, ntest, sums));
    const mw_metric_list ml = mw_loss_metrics(&s->model.loss);
    mw_wait_ctx w = {"evaluation metrics all-reduce", -1, s->o->collective_timeout};
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, mw_sums_len(&ml), MPI_DOUBLE, MPI_SUM, s->comm, &req),
           w.op);
    MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
    const double count = sums[MW_SUM_COUNT];
    *loss = count > 0 ? sums[MW_SUM_LOSS] / count : 0.0;
    for (int i = 0; i < MW_METRICS_MAX; i++)
        metric[i] = mw_metrics_value(&ml, i, sums);
    return MW_OK;
}

void mw_session_close(mw_session *s, int abandoned)
{
    if (s->ops)
        s->ops->close(&s->rep, abandoned);
    mw_dataset_free(&s->train);
    mw_dataset_free(&s->test);
    mw_arena_free(&s->m1);
    mw_arena_free(&s->m2);
    mw_arena_free(&s->m3);
    mw_model_free(&s->model);
    free(s->latest.model);
    free(s->latest.bytes);
    s->latest.model = NULL;
    s->latest.bytes = NULL;
}
