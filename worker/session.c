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
#include "worker/data/data_open.h"
#include "worker/data/preprocess.h"
#include "worker/data/skip.h"
#include "worker/data/stream.h"
#include "worker/keras/compile.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_loss.h"
#include "worker/memory.h"
#include "worker/model/diff.h"
#include "worker/model/weights.h"
#include "worker/optimizers.h"
#include "worker/session_checks.h"

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

/* The model's layers, not yet planned: --model, else the checkpoint's, else the tutorial CNN
 * (for the data's shape and classes); export needs no data (the file's own input shape). A
 * .keras archive's initial weights into *kw. */
static mw_status load_model(mw_session *s, int with_data, mw_keras_weights *kw)
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
    mw_status rc;
    /* a dense loss's width, and one beside ignore_class, is checked with the loss (check_loss) */
    const int nc = dense || o->loss.has_ignore || (with_data && s->train.label_width > 1) ? 0 : n;
    /* several named inputs: each InputLayer takes the data's part of its name */
    const mw_input_parts *parts = with_data ? &s->train.parts : NULL;
    if (o->model_path) {
        rc = mw_keras_model_load_parts(&s->model, o->model_path, h, w, c, nc, kw, parts);
    } else if (s->latest.model) {
        rc = mw_keras_load_parts(&s->model, s->latest.model, strlen(s->latest.model),
                                 "the model saved in the checkpoint", h, w, c, nc, parts);
    } else if (parts && parts->n) {
        rc = mw_err(MW_EDATA,
                    "%s: the data hold named inputs (x_train.%s, ...); expected --model, a "
                    "Functional model whose InputLayers are named after them",
                    o->data_dir, parts->name[0]);
    } else if (!with_data || (h == 28 && w == 28 && c == 1 && n == 10)) {
        rc = mw_keras_build_tutorial(&s->model, 28, 28, 1, 10);
    } else {
        char *text = tutorial_for(h, w, c, n);
        rc = text ? mw_keras_load(&s->model, text, strlen(text),
                                  "built-in model (worker/models/tutorial_cnn.json)", h, w, c, n)
                  : mw_err(MW_ENOMEM, "out of memory");
        free(text);
    }
    mw_fit fit = {&s->model, &s->train, &s->test, s->o, s->shape};
    rc = mw_fit_mismatch(&fit, rc);
    s->model.loss = o->loss; /* (finalize: a final softmax is Keras' from_logits=False) */
    if (rc == MW_OK && with_data)
        rc = mw_fit_check_loss(&fit);
    if (rc == MW_OK && with_data)
        rc = mw_fit_check_tokens(&fit);
    mw_policy policy;
    if (rc == MW_OK && o->dtype_policy && mw_policy_parse(o->dtype_policy, &policy) == 0)
        mw_model_set_policy(&s->model, policy);               /* over the model's own */
    for (int i = 0; rc == MW_OK && i < s->model.nlayers; i++) /* before any buffer is sized */
        if (s->model.layers[i].kind == MW_LAYER_MHA)
            s->model.layers[i].mha.recompute = o->attn_recompute;
    return rc;
}

/* Refuse, before anything of the model's size is allocated, a run that would not fit in what
 * this process may use (worker/memory.h): the model is planned, not allocated, so the
 * estimate comes from its shapes. mem (NULL: the check is off) was read before the data and
 * the model took their share. */
static mw_status check_memory(const mw_session *s, const mw_sysmem *mem, int nthreads)
{
    if (!mem)
        return MW_OK;
    mw_memory_estimate e;
    if (s->use == MW_USE_EXPORT)
        mw_memory_estimate_export(&e, &s->model);
    else
        mw_memory_estimate_run(&e, &s->model, &s->train, &s->test, s->o, nthreads, s->dev.use_gpu);
    const int local = s->topo->local_size > 0 ? s->topo->local_size : 1;
    if (s->rank == 0) {
        char line[1536];
        mw_log_debug("%s", mw_memory_describe(&e, mem, local, line, sizeof line));
    }
    return mw_memory_check(&e, mem, local, s->o);
}

/* A model given as a file or by the checkpoint, checked against the memory before the data
 * are loaded: read with its own input shape and planned, its parameters, optimizer state,
 * gradients and workspace alone must fit. So a model that could never fit is refused before
 * the data take their share (a 5 KB model of 10 G parameters costs no data set's load). A
 * model that does not read without the data's shape is left to build_model to report. */
static mw_status check_model_early(mw_session *s, const mw_sysmem *mem, int nthreads)
{
    const mw_train_opts *o = s->o;
    if (!mem || (!o->model_path && !s->latest.model))
        return MW_OK;
    mw_model m;
    mw_status rc = o->model_path ? mw_keras_model_load(&m, o->model_path, 0, 0, 0, 0, NULL)
                                 : mw_keras_load(&m, s->latest.model, strlen(s->latest.model),
                                                 "the model saved in the checkpoint", 0, 0, 0, 0);
    if (rc == MW_OK)
        rc = mw_model_plan(&m, (size_t)s->world * MW_ARENA_ALIGN);
    if (rc == MW_OK) {
        mw_memory_estimate e;
        mw_memory_estimate_run(&e, &m, NULL, NULL, o, nthreads, s->dev.use_gpu);
        const int local = s->topo->local_size > 0 ? s->topo->local_size : 1;
        rc = mw_memory_check(&e, mem, local, o);
    } else if (rc != MW_ENOMEM) {
        rc = MW_OK;
        mw_err_clear();
    }
    mw_model_free(&m); /* (every loader initializes it first) */
    return rc;
}

/* The limits a run meets later, checked before it starts: a training run that saves (chief.h's
 * mw_chief_checkpointing) must fit the checkpoint format's sections. */
static mw_status check_limits(const mw_session *s)
{
    const mw_train_opts *o = s->o;
    const int saves = o->checkpoint_every_epochs > 0 || o->checkpoint_every_steps > 0;
    if (s->use != MW_USE_TRAIN || !saves || s->model.nparams <= MW_CKPT_MAX_PARAMS)
        return MW_OK;
    return mw_err(MW_EMODEL,
                  "the model has %zu parameters, more than the %zu a checkpoint holds (1 GiB of "
                  "float32 per section; docs/checkpoint.md): its first save would fail; use a "
                  "smaller model, or train without checkpoints (--checkpoint-every-epochs 0)",
                  s->model.nparams, (size_t)MW_CKPT_MAX_PARAMS);
}

/* The model planned, checked against the memory and the limits, then allocated with its
 * initial weights (Keras' initializers, an archive's over them) and the optimizer slots. */
static mw_status build_model(mw_session *s, int with_data, const mw_sysmem *mem, int nthreads)
{
    mw_keras_weights kw; /* a .keras archive's initial weights */
    mw_keras_weights_init(&kw);
    mw_status rc = load_model(s, with_data, &kw);
    if (rc == MW_OK)
        rc = mw_model_plan(&s->model, (size_t)s->world * MW_ARENA_ALIGN);
    if (rc == MW_OK)
        rc = check_memory(s, mem, nthreads);
    if (rc == MW_OK)
        rc = check_limits(s);
    if (rc == MW_OK)
        rc = mw_model_alloc_params(&s->model);
    if (rc == MW_OK && with_data && s->model.mask_t) /* the ids of the mask: a named input's */
        s->train.mask_off = s->test.mask_off = s->model.layers[s->model.mask_t - 1].part_off;
    if (rc == MW_OK && with_data) /* the examples or positions the loss ignores */
        rc = mw_dataset_set_mask(&s->train, s->model.loss.has_ignore, s->model.loss.ignore_class,
                                 s->model.loss.masked, "the training set");
    if (rc == MW_OK && with_data)
        rc = mw_dataset_set_mask(&s->test, s->model.loss.has_ignore, s->model.loss.ignore_class,
                                 s->model.loss.masked, "the test set");
    if (rc == MW_OK && s->o->dtype_policy) /* the policy too: a resume computes as before */
        rc = mw_keras_source_set_policy(&s->model);
    if (rc == MW_OK) /* the loss travels in every checkpoint with the model */
        rc = mw_keras_source_set_loss(&s->model);
    if (rc == MW_OK && with_data) /* and the named inputs' lengths, for an export */
        rc = mw_keras_source_set_lengths(&s->model);
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

/* --image-size: "HxW" or "H,W", each 1..MW_DATA_MAX_DIM. */
static mw_status parse_image_size(const char *v, uint32_t *h, uint32_t *w)
{
    unsigned long a = 0, b = 0;
    char sep = 0, extra = 0;
    if (sscanf(v, "%lu%c%lu%c", &a, &sep, &b, &extra) != 3 || (sep != 'x' && sep != ',') || a < 1 ||
        b < 1 || a > MW_DATA_MAX_DIM || b > MW_DATA_MAX_DIM || v[0] == '-')
        return mw_err(MW_EINVAL,
                      "--image-size '%s': expected HEIGHTxWIDTH or HEIGHT,WIDTH, each 1..%u "
                      "(e.g. 224x224)",
                      v, MW_DATA_MAX_DIM);
    *h = (uint32_t)a, *w = (uint32_t)b;
    return MW_OK;
}

/* What --data reads besides the path. */
static mw_status data_opts(const mw_train_opts *o, mw_data_opts *d)
{
    static const int channels[] = {3, 1, 4}; /* --color-mode rgb, grayscale, rgba */
    *d = (mw_data_opts){.classes = o->classes,
                        .cifar_fine = o->cifar_label == 0,
                        .sequence_length = o->sequence_length,
                        .color_channels = channels[o->color_mode],
                        .interp = o->interpolation,
                        .crop = o->crop_to_aspect,
                        .image_key = o->image_key,
                        .label_key = o->label_key,
                        .skip_bad = o->skip_bad,
                        .shard_cache = o->shard_cache,
                        .validation_split = o->validation_split,
                        .validation_seed =
                            o->validation_seed == UINT64_MAX ? -1 : (int64_t)o->validation_seed};
    if (o->validation_seed != UINT64_MAX && o->validation_seed > UINT32_MAX)
        return mw_err(MW_EINVAL, "--validation-seed %llu: expected 0..4294967295 (NumPy's seeds)",
                      (unsigned long long)o->validation_seed);
    if (o->validation_split > 0 && o->validation_seed == UINT64_MAX)
        return mw_err(MW_EINVAL,
                      "--validation-split %g needs --validation-seed N: the held-out files are "
                      "chosen by a seeded shuffle (as Keras requires a seed)",
                      o->validation_split);
    return o->image_size ? parse_image_size(o->image_size, &d->image_h, &d->image_w) : MW_OK;
}

/* --skip-bad-examples on one encoded set: each rank decodes a stride of it, the marks of every
 * rank are combined (a max all-reduce under the collective timeout), every rank drops the same
 * examples; rank 0 reports them with the records the reader skipped. */
static mw_status drop_bad(mw_session *s, mw_dataset *d, const char *what)
{
    if (d->type != MW_IMAGES_ENCODED || d->count == 0)
        return MW_OK;
    uint8_t *bad = calloc(d->count, 1);
    if (!bad)
        return mw_err(MW_ENOMEM, "%s set: out of memory for %u marks", what, d->count);
    uint32_t nbad = 0, dropped = 0;
    char first[512];
    mw_status rc =
        mw_dataset_scan(d, bad, (uint32_t)s->rank, (uint32_t)s->world, &nbad, first, sizeof first);
    const mw_wait_ctx w = {"sharing the bad examples found", -1, s->o->collective_timeout};
    for (uint64_t at = 0; rc == MW_OK && at < d->count; at += 1u << 30) /* int counts */
        rc = mw_comm_allreduce(&w, bad + at,
                               (int)(d->count - at < (1u << 30) ? d->count - at : 1u << 30),
                               MPI_UNSIGNED_CHAR, MPI_MAX, s->comm);
    if (rc == MW_OK)
        mw_dataset_drop(d, bad, &dropped);
    free(bad);
    if (rc == MW_OK) { /* every rank learns the lowest rank's first bad example */
        const mw_status mine = nbad ? mw_err(MW_EDATA, "%s", first) : MW_OK;
        if (mw_agree(s->comm, mine, NULL) == MW_EDATA && d->skipped == 0)
            snprintf(d->skip_first, sizeof d->skip_first, "%s", mw_err_msg());
        mw_err_clear();
    }
    d->skipped += dropped;
    if (rc == MW_OK && d->count == 0)
        rc = mw_err(MW_EDATA, "%s: every example of the %s set is bad (the first: %s)",
                    s->o->data_dir, what, d->skip_first);
    if (rc == MW_OK && d->skipped && s->rank == 0)
        mw_log_warn("%s set: %u bad example(s) skipped (--skip-bad-examples), %u left; the "
                    "first: %s",
                    what, d->skipped, d->count, d->skip_first);
    return rc;
}

/* --shard-policy file: every rank the same plan of whole shards per rank (shard_plan.h). */
static mw_status plan_shards(mw_session *s)
{
    mw_shard_plan *p = &s->plan;
    MW_TRY(mw_shard_plan_make(p, &s->train, s->world, s->o->replicas_per_worker,
                              mw_session_global_batch(s), s->o->data_dir));
    if (s->rank == 0)
        mw_log_info("--shard-policy file: %u shards over %d rank(s), %ld of %u examples an "
                    "epoch (the rank with the fewest sets the epoch's length)",
                    mw_stream_source_count(s->train.stream), s->world, p->examples, s->train.count);
    return MW_OK;
}

/* Encoded training images: the decoding pool (--decode-threads; auto: 2 per GPU replica of the
 * rank, none on the CPU), caching two steps' shares of the rank. */
static mw_status start_decoding(mw_session *s)
{
    const mw_train_opts *o = s->o;
    const int rpw = o->replicas_per_worker;
    const int threads = o->decode_threads >= 0 ? o->decode_threads : s->dev.use_gpu ? 2 * rpw : 0;
    const uint64_t cap = 2 * (uint64_t)o->batch_per_replica * (uint64_t)rpw;
    if (threads == 0 || s->train.type != MW_IMAGES_ENCODED)
        return MW_OK;
    mw_log_debug("decoding pool: %d threads, %llu examples cached", threads,
                 (unsigned long long)cap);
    return mw_dataset_prefetch_start(&s->train, threads, (uint32_t)cap, o->collective_timeout);
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
    const int check = mw_memory_check_enabled() && mw_sysmem_query(&mem);
    mw_data_opts dopts;
    MW_TRY(data_opts(o, &dopts));
    /* the node's ranks load the same files at once: each reader checks its share */
    mw_sysmem_set_share(topo->local_size > 0 ? topo->local_size : 1);
    MW_TRY(settle_loss(s));
    const int nthreads = threads_for(s);
    if (with_data)
        MW_TRY(check_model_early(s, check ? &mem : NULL, nthreads));
    if (with_data)
        MW_TRY(mw_dataset_open(&s->train, &s->test, o->data_dir, &dopts));
    if (with_data && o->skip_bad) {
        MW_TRY(drop_bad(s, &s->train, "training"));
        MW_TRY(drop_bad(s, &s->test, "test"));
    }
    if (with_data && s->opts.loss.has_ignore && o->classes <= 0) /* 255 beside 0..9: no class */
        mw_dataset_classes_without(&s->train, &s->test, s->opts.loss.ignore_class);
    char note[1024];
    if (with_data && use == MW_USE_TRAIN && s->rank == 0 && o->sequence_length <= 0 && /* bytes */
        mw_dataset_unseen_classes(&s->train, &s->test, o->data_dir, o->classes > 0, note,
                                  sizeof note) > 0)
        mw_log_warn("%s", note);
    MW_TRY(build_model(s, with_data, check ? &mem : NULL, nthreads));
    if (use == MW_USE_EXPORT)
        return MW_OK;
    /* the model's input pipeline: random layers act on the training set only */
    s->train.pre = s->test.pre = s->model.pre;
    s->train.augment = use == MW_USE_TRAIN;
    s->train.aug_seed = s->seed;
    if (use == MW_USE_TRAIN)
        MW_TRY(start_decoding(s));
    if (use == MW_USE_TRAIN && o->shard_policy == 1)
        MW_TRY(plan_shards(s));
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
    int i = 0; /* the first layer, after the named inputs' InputLayers */
    while (i < m->nlayers && m->layers[i].kind == MW_LAYER_INPUT)
        i++;
    return i < m->nlayers && m->layers[i].kind == MW_LAYER_EMBED ? m->layers[i].out_w : 1;
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

long mw_session_epoch_examples(const mw_session *s)
{
    return s->plan.ids ? s->plan.examples : (long)s->train.count;
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

/* Without --dtype-policy, a run computes in the policy of the model it resumes: the saved
 * model's (an explicit --dtype-policy is the user's choice). */
static int policy_differs(const mw_session *s, const mw_model *saved, char *what, size_t n)
{
    const mw_policy a = mw_model_policy(saved), b = mw_model_policy(&s->model);
    if (s->o->dtype_policy || a == b)
        return 0;
    snprintf(what, n, "dtype policy %s in the checkpoint, %s in --model (pass --dtype-policy %s)",
             mw_policy_name(a), mw_policy_name(b), mw_policy_name(a));
    return 1;
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
    mw_status rc = mw_keras_load_parts(&saved, c->model_json, strlen(c->model_json), origin, sh[0],
                                       sh[1], sh[2], sh[3], &s->model.parts);
    if (rc == MW_ENOMEM)
        return rc;
    if (rc != MW_OK) {
        snprintf(what, sizeof what, "the saved model does not fit here: %s", mw_err_msg());
        mw_err_clear();
    } else {
        differ = mw_model_diff(&saved, &s->model, what, sizeof what) ||
                 mw_preprocess_diff(saved.pre, s->model.pre, what, sizeof what) ||
                 policy_differs(s, &saved, what, sizeof what);
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
    if (c->has_loss_scale && !o->dtype_policy && s->loss_scale <= 0) /* an older checkpoint's */
        return mw_err(MW_ECKPT,
                      "%s was trained with mixed_float16 (it holds a loss scale); this run "
                      "computes in %s: pass --dtype-policy mixed_float16 to resume it as it was "
                      "trained (or --dtype-policy float32 to change)",
                      name, mw_policy_name(mw_model_policy(&s->model)));
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
    MW_TRY(mw_dataset_status(&s->test)); /* an image that did not decode */
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
    mw_shard_plan_free(&s->plan);
    mw_arena_free(&s->m1);
    mw_arena_free(&s->m2);
    mw_arena_free(&s->m3);
    mw_model_free(&s->model);
    free(s->latest.model);
    free(s->latest.bytes);
    s->latest.model = NULL;
    s->latest.bytes = NULL;
}
