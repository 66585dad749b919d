/* The options of a run (`mwtrain train`, `eval`, `export`), as the command line sets them
 * (worker/cli.c); every worker module reads them, so they live apart from the loop. */
#ifndef MW_WORKER_OPTS_H
#define MW_WORKER_OPTS_H

#include <stdint.h>

#include "cluster/allreduce.h"
#include "worker/model/loss.h"
#include "worker/schedule.h"

/* --collective-timeout's default, seconds: every wait of a run, not only the step's. */
#define MW_DEFAULT_TIMEOUT 300.0

/* Keras' optimizers, X(ENUM, name) in the order of --optimizer's choices: name is how
 * --optimizer and checkpoints spell it. Each has its row in the optimizer table
 * (worker/optimizers.h). */
#define MW_OPTIMIZERS(X)                                                                           \
    X(ADAM, adam)                                                                                  \
    X(SGD, sgd) X(ADAMW, adamw) X(RMSPROP, rmsprop) X(ADAGRAD, adagrad) X(ADAMAX, adamax)
#define MW_OPT_ENUM(E, name) MW_OPT_##E,
typedef enum { MW_OPTIMIZERS(MW_OPT_ENUM) MW_OPT_COUNT } mw_optimizer;
#undef MW_OPT_ENUM
/* The names, in mw_optimizer order, NULL-terminated. */
extern const char *const mw_optimizer_names[MW_OPT_COUNT + 1];
typedef enum { MW_PROGRESS_AUTO, MW_PROGRESS_BAR, MW_PROGRESS_LINES, MW_PROGRESS_NONE } mw_progress;

/* The loss scales a run can hold: below 2^-24 (float16's smallest step) a run has diverged;
 * 2^127 is float32's largest power of 2 (Keras keeps the scale in a float32 variable), where
 * doubling stops. And the most finite steps between doublings (dynamic_growth_steps): a
 * checkpoint's finite-step count is below it. */
#define MW_LOSS_SCALE_MIN 0x1p-24
#define MW_LOSS_SCALE_MAX 0x1p127
#define MW_LOSS_SCALE_MAX_GROWTH 1000000000L

typedef struct {
    int epochs;              /* 10 */
    int batch_per_replica;   /* 64 */
    int replicas_per_worker; /* 0: one per GPU the rank drives, 1 on the CPU */
    int steps_per_epoch;     /* 0: the whole training set */
    int micro_batch;         /* examples per forward/backward pass in a CPU thread (16); a GPU
                                runs a replica's slice at once (up to 1024) */
    double learning_rate;
    mw_optimizer optimizer;
    double momentum; /* SGD */
    double beta1, beta2, epsilon;
    uint64_t seed;
    int no_shuffle;       /* --no-shuffle: every epoch in file order (Keras shuffle=False) */
    const char *data_dir; /* --data PATH or --data-dir DIR */
    int threads;          /* 0: cores / ranks on the node */
    const char *backend;  /* "cpu" or "ref" */
    mw_progress progress;
    double progress_interval;    /* seconds between progress lines (non-TTY) */
    int eval_batch;              /* examples per evaluation batch */
    const char *dump_weights;    /* write final raw float32 params here (tests) */
    const char *tf_config;       /* --tf-config PATH, or NULL for $TF_CONFIG */
    const char *checkpoint_dir;  /* ./training_checkpoints */
    int checkpoint_every_epochs; /* 2: after epochs 1, 3, 5, ... (zero-based epoch % N == 0) */
    int checkpoint_every_steps;  /* 0: off */
    int keep_checkpoints;        /* 5; <= 0 keeps all */
    int resume;                  /* continue from the latest valid checkpoint */
    const char *summary_dir;     /* ./logs; "" disables */
    int test_examples;           /* evaluate on the first N test examples (0: all) */
    const char *export_path;     /* `export --output` */
    const char *export_format;   /* `export --format`: safetensors (default), keras, weights-h5 */
    const char *model_path;      /* --model: Keras JSON (NULL: the tutorial CNN) */
    const char *device;          /* --device auto|cpu|gpu (auto) */
    mw_ar_algo allreduce;
    double collective_timeout; /* seconds (MW_DEFAULT_TIMEOUT) */
    int overlap_allreduce;     /* --overlap-allreduce: 1 on, 0 off (off) */
    int attn_recompute;        /* --attention-memory: 1 recompute, 0 store (store) */
    double bucket_mb;          /* --bucket-mb: overlap's bucket size in MiB (4) */
    int gpu_allreduce;         /* --gpu-allreduce: 0 hierarchical, 1 nccl (one communicator) */
    double preemption_grace;   /* seconds from a SIGTERM to the end, saved or not (20) */
    int classes;               /* --classes: 0 = the largest label + 1 */
    int sequence_length;       /* --sequence-length: --data is a text corpus (0: not) */
    int cifar_label;           /* --label: 0 fine, 1 coarse (CIFAR-100) */
    const char *image_size;    /* --image-size HxW or H,W: encoded images' decoded size (NULL:
                                  the first training image's) */
    int color_mode;            /* --color-mode: 0 rgb, 1 grayscale, 2 rgba */
    int interpolation;         /* --interpolation: mw_image_interp (0 bilinear, 1 nearest) */
    int crop_to_aspect;        /* --crop-to-aspect-ratio */
    const char *image_key;     /* --image-key: TFRecord feature of the image (NULL: default) */
    const char *label_key;     /* --label-key: TFRecord feature of the label (NULL: default) */
    int decode_threads;        /* --decode-threads: encoded images' decoding pool (-1: auto) */
    int skip_bad;              /* --skip-bad-examples: drop images and records that fail */
    int shard_policy;          /* --shard-policy: 0 data (examples), 1 file (whole shards) */
    const char *shard_cache;   /* --shard-cache: compressed shards' plain copies (NULL: beside) */
    double validation_split;   /* --validation-split: an image folder's held-out fraction (0) */
    uint64_t validation_seed;  /* --validation-seed (UINT64_MAX: not given) */

    /* an evaluator task's --device (cpu): on a GPU it would share a trainer's */
    const char *evaluator_device;
    const char *timeline; /* --timeline FILE: each training rank's Chrome trace (NULL: none) */
    int tf32;             /* --tf32: TF32 tensor-core math on GPUs (cuBLAS, cuDNN) */
    int cuda_graphs;      /* --cuda-graphs: 1 on, 0 off (off): worker/replicas/gpu_graphs.h */
    /* --dtype-policy: Keras' policy for every layer (NULL: each layer's own, float32 when
     * the model says nothing) */
    const char *dtype_policy;
    /* The rest of a Keras optimizer (worker/keras/optimizer.h reads them from its JSON) */
    const char *optimizer_config;        /* --optimizer-config FILE, or NULL */
    int optimizer_given, momentum_given; /* the command line gave --optimizer, --learning-rate
                                            or --momentum; --momentum */
    int nesterov, amsgrad, centered;     /* SGD; Adam, AdamW; RMSprop */
    double rho;                          /* RMSprop (0.9) */
    double initial_accumulator;          /* Adagrad initial_accumulator_value (0.1) */
    double weight_decay;                 /* decoupled, 0: none (AdamW: 0.004) */
    double clipnorm, clipvalue, global_clipnorm; /* 0: off; at most one is set */
    mw_schedule schedule; /* learning_rate as a schedule; constant: learning_rate */
    /* mixed_float16's dynamic loss scaling (Keras' LossScaleOptimizer, whose config sets them):
     * the first scale (a power of 2, 2^15) and the finite steps after which it doubles (2000) */
    double loss_scale_initial;
    long loss_scale_growth;
    /* The loss and its metric (worker/keras/keras_loss.h: mw_loss_resolve): --loss NAME or
     * --loss-config FILE (never both), else a .keras --model's compile_config, else sparse
     * softmax cross-entropy from logits with accuracy; loss_from says which ("" for the
     * default) for messages */
    const char *loss_name;
    const char *loss_config;
    const char *metrics; /* --metrics: Keras' names, comma-separated, over the loss's own */
    mw_loss loss;
    char loss_from[600];
} mw_train_opts;

void mw_train_opts_default(mw_train_opts *o);
/* o's optimizer's name (mw_optimizer_names), as checkpoints record it. */
const char *mw_opts_optimizer_name(const mw_train_opts *o);
/* The --device mode of a task: --evaluator-device for an evaluator (the CPU by default: on a
 * node it shares with trainers it would share one of their GPUs, which EXCLUSIVE_PROCESS
 * compute mode refuses), --device for the others. */
const char *mw_opts_device_for(const mw_train_opts *o, int is_evaluator);

#endif
