/* Flag table, parsing and help for the mwtrain command line.
 *
 * Each flag is one row of `flags`: its name, metavar and help, the commands that take it, the
 * kind of value, the mw_cli field it sets and the values it allows. One loop reads argv against
 * the table, so every flag is parsed, range-checked, reported and documented the same way; the
 * few things a row cannot say (-h, the `--` end of flags, a flag name where a value belongs) are
 * code in parse_flags. */
#include "worker/cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/preempt.h"
#include "common/status.h"
#include "worker/data/data.h"

/* which commands take a flag */
enum { C_TRAIN = 1, C_EVAL = 2, C_EXPORT = 4, C_CLUSTER = 8, C_SUMMARY = 16, C_TFCONF = 32 };
#define C_ALL (~0u)

typedef enum {
    K_SWITCH, /* no value: stores .on in an int */
    K_INT,    /* int in [lo, hi] */
    K_U64,    /* uint64_t, any non-negative decimal */
    K_DOUBLE, /* double in [lo, hi], an end excluded by .open */
    K_STRING, /* const char *, any value, "" included */
    K_PATH,   /* const char *, not empty (.expect, else from the metavar: "a directory", ...) */
    K_OUTPUT, /* K_PATH that will be written: its directory must exist and be writable now */
    K_CHOICE, /* an enum: the index of the value in .choices */
    K_NAME    /* const char *: the entry of .choices equal to the value (a static string) */
} kind;

enum { OPEN_LO = 1, OPEN_HI = 2 }; /* .open: that end of [lo, hi] is excluded */

typedef struct {
    const char *name;
    const char *metavar; /* NULL: a switch, no value */
    unsigned cmds;       /* C_*: the commands that take it */
    kind kind;
    size_t off;                 /* the mw_cli field it sets, see AT() */
    double lo, hi;              /* K_INT, K_DOUBLE: the allowed range */
    unsigned open;              /* K_DOUBLE: OPEN_LO, OPEN_HI */
    const char *const *choices; /* K_CHOICE, K_NAME: NULL-terminated */
    int on;                     /* K_SWITCH: the value stored */
    unsigned required;          /* C_*: the commands that fail without it */
    const char *expect;         /* K_PATH: what a value is, for an empty one (NULL: metavar) */
    const char *help;
} flag;

/* offsetof(mw_cli, m), and a compile error unless the field has type T, so a row cannot set a
 * field through the wrong kind (_Generic without a matching type does not compile). */
#define AT(m, T) (offsetof(mw_cli, m) + 0 * sizeof(char[_Generic(((mw_cli *)0)->m, T : 1)]))
#define TR(m, T) AT(train.m, T)

/* K_CHOICE stores an int into these enums. */
_Static_assert(sizeof(mw_optimizer) == sizeof(int), "K_CHOICE stores an int");
_Static_assert(sizeof(mw_progress) == sizeof(int), "K_CHOICE stores an int");
_Static_assert(sizeof(mw_ar_algo) == sizeof(int), "K_CHOICE stores an int");

static const char *const backends[] = {"cpu", "ref", NULL};
static const char *const progresses[] = {"auto", "bar", "lines", "none", NULL}; /* mw_progress */
static const char *const devices[] = {"auto", "cpu", "gpu", NULL};
static const char *const cifar_labels[] = {"fine", "coarse", NULL}; /* mw_train_opts.cifar_label */
static const char *const color_modes[] = {"rgb", "grayscale", "rgba", NULL}; /* .color_mode */
static const char *const shard_policies[] = {"data", "file", NULL};          /* .shard_policy */
static const char *const interpolations[] = {"bilinear", "nearest", NULL};   /* mw_image_interp */
static const char *const policies[] = {"float32", "mixed_bfloat16", "mixed_float16", NULL};
static const char *const export_formats[] = {"safetensors", "keras", "weights-h5", NULL};
static const char *const on_off[] = {"off", "on", NULL};             /* 0 off, 1 on */
static const char *const gpu_ars[] = {"hierarchical", "nccl", NULL}; /* opts.h gpu_allreduce */
static const char *const attn_mems[] = {"store", "recompute", NULL}; /* opts.h attn_recompute */
_Static_assert(sizeof progresses / sizeof *progresses == MW_PROGRESS_NONE + 2,
               "a name per mw_progress, and the NULL");

/* In --help order. */
static const flag flags[] = {
    {"epochs", "N", C_TRAIN, K_INT, TR(epochs, int), .lo = 0, .hi = 1000000,
     .help = "passes over the training set (default 10)"},
    {"batch-per-replica", "N", C_TRAIN | C_EVAL, K_INT, TR(batch_per_replica, int), .lo = 1,
     .hi = 65536,
     .help = "examples per replica per step; global batch = N x replicas (default 64)"},
    {"replicas-per-worker", "R", C_TRAIN, K_INT, TR(replicas_per_worker, int), .lo = 1, .hi = 1024,
     .help = "model replicas per rank; on GPUs a multiple of the GPUs the rank drives "
             "(default: one per GPU, 1 on the CPU)"},
    {"steps-per-epoch", "N", C_TRAIN, K_INT, TR(steps_per_epoch, int), .lo = 1, .hi = INT_MAX,
     .help = "stop each epoch after N steps, for quick runs (default: whole set)"},
    {"micro-batch", "N", C_TRAIN | C_EVAL, K_INT, TR(micro_batch, int), .lo = 1, .hi = 65536,
     .help = "examples per forward/backward pass inside a CPU thread; gradients add up "
             "over the replica's slice, so only float rounding changes (default 16: fits "
             "the caches; a GPU runs a replica's slice at once, up to 1024)"},
    {"learning-rate", "X", C_TRAIN, K_DOUBLE, TR(learning_rate, double), .lo = 0, .hi = 1e6,
     .open = OPEN_LO, .help = "optimizer learning rate (default 0.001)"},
    {"optimizer", "NAME", C_TRAIN, K_CHOICE, TR(optimizer, mw_optimizer),
     .choices = mw_optimizer_names,
     .help = "a Keras optimizer with Keras' defaults, except SGD's momentum (--momentum); "
             "adamw: weight decay 0.004 (default adam)"},
    {"momentum", "X", C_TRAIN, K_DOUBLE, TR(momentum, double), .lo = 0, .hi = 1, .open = OPEN_HI,
     .help = "SGD momentum in [0, 1) (default 0.9), RMSprop's (default 0)"},
    {"optimizer-config", "FILE", C_TRAIN, K_PATH, TR(optimizer_config, const char *),
     .help = "the optimizer as keras.optimizers.serialize writes it (JSON; Keras 3 or 2): "
             "any optimizer --optimizer names (by its Keras class) with weight decay, clipping "
             "and a learning-rate schedule; an error together with --optimizer, "
             "--learning-rate or --momentum"},
    {"loss", "NAME", C_TRAIN | C_EVAL | C_EXPORT, K_PATH, TR(loss_name, const char *),
     .expect = "a Keras loss name (e.g. sparse_categorical_crossentropy, mse: `mwtrain train "
               "--help` lists them; leave --loss out for the default)",
     .help = "a Keras loss with Keras' defaults (from_logits=False: the output ends in "
             "softmax or sigmoid): sparse_categorical_crossentropy, categorical_crossentropy, "
             "binary_crossentropy, binary_focal_crossentropy, mse, mae, huber, log_cosh "
             "(default: a .keras --model's compile_config, else sparse categorical "
             "cross-entropy from logits)"},
    {"loss-config", "FILE", C_TRAIN | C_EVAL | C_EXPORT, K_PATH, TR(loss_config, const char *),
     .help = "the loss as keras.losses.serialize writes it (JSON): from_logits, "
             "label_smoothing, delta, gamma, alpha, apply_class_balancing, ignore_class; an "
             "error together with --loss"},
    {"metrics", "LIST", C_TRAIN | C_EVAL | C_EXPORT, K_PATH, TR(metrics, const char *),
     .expect = "Keras metric names, comma-separated (e.g. accuracy or accuracy,auc: `mwtrain "
               "train --help` lists them; leave --metrics out for the default)",
     .help = "the metrics reported, Keras' names in order, comma-separated (at most 4): "
             "accuracy, binary_accuracy, categorical_accuracy, sparse_categorical_accuracy, "
             "auc, mae, mse, rmse (default: a .keras --model's compile_config, else the "
             "loss's accuracy, or MAE for a regression)"},
    {"seed", "N", C_TRAIN, K_U64, TR(seed, uint64_t),
     .help = "seed of initial weights and the shuffle (default 42)"},
    {"no-shuffle", NULL, C_TRAIN, K_SWITCH, TR(no_shuffle, int), .on = 1,
     .help = "every epoch takes the training set in file order (Keras' fit(shuffle=False)), "
             "e.g. to feed another framework the same batches; default a seeded shuffle "
             "per epoch"},
    {"data-dir", "DIR", C_TRAIN | C_EVAL, K_PATH, TR(data_dir, const char *),
     .help = "directory with the IDX files (train-images-idx3-ubyte[.gz], ...) "
             "(default " MW_DATA_DEFAULT_DIR ")"},
    {"data", "PATH", C_TRAIN | C_EVAL, K_PATH, TR(data_dir, const char *),
     .help = "the data, recognised by content: a Keras-style .npz (x_train, y_train, x_test, "
             "y_test), or a directory of those four .npy files (memory-mapped), of CIFAR-10 or "
             "CIFAR-100 binary batches, of train.csv and test.csv (label, features), an image "
             "folder (train/ and test/ of class folders), TFRecord shards of tf.train.Example, "
             "or of IDX files (same as --data-dir; "
             "default " MW_DATA_DEFAULT_DIR ")"},
    {"classes", "N", C_TRAIN | C_EVAL, K_INT, TR(classes, int), .lo = 1, .hi = 65536,
     .help = "number of classes; every label must be below it (default: the largest label + "
             "1; CIFAR: 10, 100 or 20)"},
    {"sequence-length", "T", C_TRAIN | C_EVAL, K_INT, TR(sequence_length, int), .lo = 1, .hi = 4096,
     .help = "--data is a text file, a byte-level language-modelling corpus: windows of T + 1 "
             "bytes (T token ids, each byte's next as its label), the last tenth for "
             "validation"},
    {"label", "fine|coarse", C_TRAIN | C_EVAL, K_CHOICE, TR(cifar_label, int),
     .choices = cifar_labels,
     .help = "CIFAR-100's labels: 100 fine or 20 coarse classes "
             "(default fine)"},
    {"image-size", "HxW", C_TRAIN | C_EVAL, K_STRING, TR(image_size, const char *),
     .help = "encoded images (an image folder, TFRecord shards) are resized to H x W pixels, "
             "as image_dataset_from_directory's image_size (default: the first training "
             "image's size)"},
    {"color-mode", "rgb|grayscale|rgba", C_TRAIN | C_EVAL, K_CHOICE, TR(color_mode, int),
     .choices = color_modes,
     .help = "encoded images are decoded to 3, 1 or 4 channels, as Keras' color_mode "
             "(default rgb)"},
    {"interpolation", "bilinear|nearest", C_TRAIN | C_EVAL, K_CHOICE, TR(interpolation, int),
     .choices = interpolations,
     .help = "how encoded images are resized (default bilinear, as Keras)"},
    {"crop-to-aspect-ratio", NULL, C_TRAIN | C_EVAL, K_SWITCH, TR(crop_to_aspect, int), .on = 1,
     .help = "resize encoded images without distortion: first the largest centered crop of "
             "--image-size's aspect ratio (Keras' crop_to_aspect_ratio=True)"},
    {"decode-threads", "N", C_TRAIN, K_INT, TR(decode_threads, int), .lo = 0, .hi = 256,
     .help = "image folders and TFRecord shards: threads per rank decoding the next step's "
             "images while this one computes (0: decode in the compute threads as batches are "
             "assembled; default 0 on the CPU, where decoding would take cores from compute, "
             "and 2 per GPU rank)"},
    {"skip-bad-examples", NULL, C_TRAIN | C_EVAL, K_SWITCH, TR(skip_bad, int), .on = 1,
     .help = "image folders and TFRecord shards: drop the examples whose image does not decode "
             "or whose record is damaged (found before training; each rank scans a share), "
             "reporting how many, instead of failing on the first (tf.data's ignore_errors)"},
    {"validation-split", "F", C_TRAIN | C_EVAL, K_DOUBLE, TR(validation_split, double), .lo = 0,
     .hi = 1, .open = OPEN_LO | OPEN_HI,
     .help = "an image folder of class folders without train/ and test/: hold out the fraction "
             "F for testing, the files Keras' image_dataset_from_directory(validation_split=F, "
             "seed=N) holds out (needs --validation-seed)"},
    {"validation-seed", "N", C_TRAIN | C_EVAL, K_U64, TR(validation_seed, uint64_t),
     .help = "the seed of --validation-split's shuffle, Keras' seed (0..4294967295)"},
    {"shard-policy", "data|file", C_TRAIN, K_CHOICE, TR(shard_policy, int),
     .choices = shard_policies,
     .help = "TFRecord shards: data (default) shuffles all examples and each rank decodes its "
             "replicas' slices, the same batches for any layout; file gives rank r the shards "
             "r, r + ranks, ... whole (tf.data's AutoShardPolicy.FILE): a rank reads only its "
             "files, and the batches depend on the layout"},
    {"shard-cache", "DIR", C_TRAIN | C_EVAL, K_PATH, TR(shard_cache, const char *),
     .help = "TFRecord shards: their kept files go to DIR/.mwtrain-cache/ (default: beside the "
             "shards): each shard's index of offsets and labels, read by later starts instead of "
             "the shard, and the plain copies compressed shards are decompressed into once"},
    {"image-key", "KEY", C_TRAIN | C_EVAL, K_PATH, TR(image_key, const char *),
     .expect = "the name of a bytes feature of the Examples",
     .help = "TFRecord shards: the Example feature holding the encoded image (default "
             "image/encoded, else image)"},
    {"label-key", "KEY", C_TRAIN | C_EVAL, K_PATH, TR(label_key, const char *),
     .expect = "the name of an int64 feature of the Examples",
     .help = "TFRecord shards: the Example feature holding the class label (default "
             "image/class/label, else label)"},
    {"threads", "N", C_TRAIN | C_EVAL, K_INT, TR(threads, int), .lo = 1, .hi = 1024,
     .help = "compute threads per rank (default: cores / ranks on the node)"},
    {"backend", "cpu|ref", C_TRAIN | C_EVAL, K_NAME, TR(backend, const char *), .choices = backends,
     .help = "kernels: fast CPU path or the plain reference (default cpu)"},
    {"progress", "auto|bar|lines|none", C_TRAIN, K_CHOICE, TR(progress, mw_progress),
     .choices = progresses,
     .help = "progress during an epoch: a bar on a terminal, else lines (default auto)"},
    {"progress-interval", "SECONDS", C_TRAIN, K_DOUBLE, TR(progress_interval, double), .lo = 0.01,
     .hi = 86400, .help = "seconds between progress lines (default 5)"},
    {"dump-weights", "FILE", C_TRAIN, K_OUTPUT, TR(dump_weights, const char *),
     .help = "write the final parameters as raw float32 (for tests)"},
    {"tf-config", "FILE", C_TRAIN | C_EVAL | C_EXPORT | C_CLUSTER, K_PATH,
     TR(tf_config, const char *),
     .help = "TF_CONFIG JSON file (default: the TF_CONFIG environment variable; "
             "neither: all ranks are workers)"},
    {"allreduce", "ALGORITHM", C_TRAIN, K_CHOICE, TR(allreduce, mw_ar_algo),
     .choices = mw_ar_algo_names,
     .help = "gradient all-reduce algorithm (default auto: hierarchical when a node has "
             "several ranks, else ring, MPI below 64 KiB)"},
    {"overlap-allreduce", "on|off", C_TRAIN, K_CHOICE, TR(overlap_allreduce, int),
     .choices = on_off,
     .help = "all-reduce the gradients in buckets, each as soon as the backward has finished "
             "its layers, while the earlier layers' backward runs (CPU, and the GPUs of one "
             "node; default off)"},
    {"attention-memory", "store|recompute", C_TRAIN, K_CHOICE, TR(attn_recompute, int),
     .choices = attn_mems,
     .help = "attention's probabilities (examples x heads x query x key steps per layer): "
             "store them from the forward for the backward (default), or recompute them in "
             "the backward one example at a time (the same values; memory for one example's, "
             "for a second pass of the attention's forward)"},
    {"bucket-mb", "MIB", C_TRAIN, K_DOUBLE, TR(bucket_mb, double), .lo = 0, .hi = 1e6,
     .help = "--overlap-allreduce on: the gradient bucket size in MiB, consecutive layers in "
             "reverse order (0: a bucket per layer; default 4)"},
    {"gpu-allreduce", "hierarchical|nccl", C_TRAIN, K_CHOICE, TR(gpu_allreduce, int),
     .choices = gpu_ars,
     .help = "GPUs on several nodes: hierarchical (default: NCCL inside each node, the MPI "
             "ring between nodes through host memory, for any network MPI reaches) or nccl "
             "(one NCCL communicator over every GPU: NCCL's own transport, the choice for "
             "InfiniBand or RoCE)"},
    {"collective-timeout", "SECONDS", C_TRAIN | C_EVAL, K_DOUBLE, TR(collective_timeout, double),
     .lo = 0.1, .hi = 1e7,
     .help = "abort the job (exit 131) when a collective waits longer (default 300); on a GPU, "
             "counted from the device's last finished kernel"},
    {"preemption-grace", "SECONDS", C_TRAIN, K_DOUBLE, TR(preemption_grace, double), .lo = 1,
     .hi = 86400,
     .help = "after SIGTERM, SIGINT or SIGUSR1 the ranks stop at the next step, the chief "
             "saves it and all exit 133; past this many seconds from the signal (a peer gone, "
             "a save that hangs) the process ends at once with exit 131, unsaved; keep it "
             "below the scheduler's own grace (Kubernetes 30 s) (default 20)"},
    {"checkpoint-dir", "DIR", C_TRAIN | C_EVAL | C_EXPORT, K_PATH, TR(checkpoint_dir, const char *),
     .help = "checkpoints (ckpt-N and a `checkpoint` index), written by the chief only "
             "(default ./training_checkpoints)"},
    {"checkpoint-every-epochs", "N", C_TRAIN, K_INT, TR(checkpoint_every_epochs, int), .lo = 0,
     .hi = 1000000,
     .help = "save after epochs 1, 1+N, 1+2N, ... and after the last; 0: never "
             "(default 2, as the tutorial)"},
    {"checkpoint-every-steps", "N", C_TRAIN, K_INT, TR(checkpoint_every_steps, int), .lo = 0,
     .hi = INT_MAX, .help = "also save every N steps (default 0: off)"},
    {"keep-checkpoints", "N", C_TRAIN, K_INT, TR(keep_checkpoints, int), .lo = 0, .hi = 1000000,
     .help = "keep the newest N checkpoints; 0 keeps all (default 5)"},
    {"resume", NULL, C_TRAIN, K_SWITCH, TR(resume, int), .on = 1,
     .help = "continue from the latest valid checkpoint (read by the chief, broadcast); "
             "starts from scratch when the directory has none yet"},
    {"summary-dir", "DIR", C_TRAIN, K_STRING, TR(summary_dir, const char *),
     .help = "TensorBoard event file and metrics.csv, written by the chief; \"\" "
             "disables (default ./logs)"},
    {"test-examples", "N", C_TRAIN | C_EVAL, K_INT, TR(test_examples, int), .lo = 1, .hi = INT_MAX,
     .help = "evaluate on the first N test examples only (default: all)"},
    {"output", "FILE", C_EXPORT, K_OUTPUT, TR(export_path, const char *), .required = C_EXPORT,
     .help = "where to write the exported file (required)"},
    {"json", NULL, C_CLUSTER, K_SWITCH, AT(json, int), .on = 1,
     .help = "one JSON object instead of the table"},
    {"hostfile", "FILE", C_TFCONF, K_PATH, AT(hostfile, const char *), .required = C_TFCONF,
     .help = "Open MPI hostfile: one worker task per slot (required)"},
    {"task", "worker:I", C_TFCONF, K_STRING, AT(task, const char *),
     .help = "print only this task's TF_CONFIG"},
    {"port", "P", C_TFCONF, K_INT, AT(port, int), .lo = 1, .hi = 65535,
     .help = "first port of each host's tasks (default 2222)"},
    {"model", "FILE", C_TRAIN | C_SUMMARY, K_PATH, TR(model_path, const char *),
     .help = "a Keras Sequential or Functional model as model.to_json() writes it, or a .keras "
             "archive (its architecture and initial weights); default: "
             "the tutorial CNN, or with --resume the model saved in the checkpoint"},
    {"device", "auto|cpu|gpu", C_TRAIN | C_EVAL | C_CLUSTER, K_NAME, TR(device, const char *),
     .choices = devices,
     .help = "where to train: auto uses the CPU when no CUDA device is found and says "
             "so; gpu without a device is an error (default auto)"},
    {"format", "safetensors|keras|weights-h5", C_EXPORT, K_NAME, TR(export_format, const char *),
     .choices = export_formats,
     .help = "export as safetensors, a .keras archive (keras.models.load_model) or a "
             ".weights.h5 (model.load_weights) (default safetensors)"},
    {"evaluator-device", "auto|cpu|gpu", C_TRAIN | C_CLUSTER, K_NAME,
     TR(evaluator_device, const char *), .choices = devices,
     .help = "where an evaluator task evaluates (default cpu: on a GPU it would share a "
             "trainer's, which EXCLUSIVE_PROCESS compute mode refuses)"},
    {"timeline", "FILE", C_TRAIN, K_OUTPUT, TR(timeline, const char *),
     .help = "each training rank writes a Chrome trace of its steps (chrome://tracing, "
             "Perfetto): %r in FILE becomes the rank, else several ranks write "
             "FILE.rankN (before the extension)"},
    {"tf32", NULL, C_TRAIN | C_EVAL, K_SWITCH, TR(tf32, int), .on = 1,
     .help = "on GPUs, TF32 tensor-core math in cuBLAS and cuDNN (faster from Ampere on, "
             "inputs rounded to 10 mantissa bits); default plain FP32"},
    {"cuda-graphs", "on|off", C_TRAIN | C_EVAL, K_CHOICE, TR(cuda_graphs, int), .choices = on_off,
     .help = "on GPUs, each micro-batch shape's forward and backward captured once as a CUDA "
             "graph and replayed, one launch instead of one per kernel (default off)"},
    {"dtype-policy", "float32|mixed_bfloat16|mixed_float16", C_TRAIN | C_EVAL | C_EXPORT, K_NAME,
     TR(dtype_policy, const char *), .choices = policies,
     .help = "Keras' dtype policy for every layer, over the model's own: mixed_bfloat16 "
             "computes in bfloat16 with float32 weights, slots and loss, on CPUs with "
             "AVX512_BF16 or AMX and on GPUs; mixed_float16 in float16 with dynamic loss "
             "scaling (a LossScaleOptimizer in --optimizer-config sets it), on GPUs; give it "
             "again with --resume and export (default: each layer's dtype in the Keras "
             "model, float32 for the built-in one)"},
    {"quiet", NULL, C_ALL, K_SWITCH, AT(log_level, int), .on = MW_LOG_WARN,
     .help = "only warnings and errors on stderr"},
    {"verbose", NULL, C_ALL, K_SWITCH, AT(log_level, int), .on = MW_LOG_DEBUG,
     .help = "debug messages on stderr"},
    {"help", NULL, C_ALL, K_SWITCH, AT(help, int), .on = 1, .help = "show this help"},
};
enum { NFLAGS = sizeof flags / sizeof *flags };

static const struct {
    const char *name;
    mw_cmd cmd;
    unsigned mask;
    const char *usage, *about;
} commands[] = {
    {"train", MW_CMD_TRAIN, C_TRAIN, "[mpirun -n N] mwtrain train [flags]",
     "Train the model; prints one line per epoch:\n"
     "  Epoch 1, Loss: L, Accuracy: A, Test Loss: L, Test Accuracy: A, Time: S s, Images/s: R"},
    {"eval", MW_CMD_EVAL, C_EVAL, "[mpirun -n N] mwtrain eval [flags]",
     "Restore the latest checkpoint (no cluster needed) and evaluate the test set,\n"
     "sharded over the ranks. In one process it prints, as the tutorial does:\n"
     "  Accuracy after restoring the saved model without strategy: X"},
    {"export", MW_CMD_EXPORT, C_EXPORT, "mwtrain export --output FILE [flags]",
     "Write the latest checkpoint's weights as safetensors (Keras names and layouts),\n"
     "a .keras archive or a .weights.h5 (--format; see docs/formats.md)."},
    {"cluster", MW_CMD_CLUSTER, C_CLUSTER, "[mpirun -n N] mwtrain cluster [flags]",
     "Resolve the cluster exactly as `train` would (TF_CONFIG or the MPI world) and\n"
     "print one row per rank: rank, task, host, node, local rank, role, and the device\n"
     "it would train on under --device (cpu, cuda:N, or cuda:A-B for several GPUs)."},
    {"summary", MW_CMD_SUMMARY, C_SUMMARY, "mwtrain summary [flags]",
     "Print the model as a Keras-like table: layers, output shapes, parameter counts."},
    {"tf-config", MW_CMD_TFCONFIG, C_TFCONF, "mwtrain tf-config --hostfile FILE [flags]",
     "Print the TF_CONFIG of every task of an Open MPI hostfile (one worker per slot),\n"
     "one line `worker:I JSON` each, or only the JSON of --task."},
};
enum { NCOMMANDS = sizeof commands / sizeof *commands };

/* The exit codes from the one list (common/status.h), a line per code with the statuses that
 * end with it, and the signals' (common/preempt.h); tests/check_exit_codes.py compares these
 * lines with docs/commands.md's table. */
static void print_exit_codes(FILE *f)
{
    fprintf(f, "exit codes (1 to 8: fix the input, do not retry; 128 and up: worth a restart;\n"
               "docs/commands.md):\n");
    for (int code = 0; code < MW_PREEMPT_SIGNAL_EXIT * 2; code++) {
        int n = 0;
        for (int s = 0; s < MW_STATUS_COUNT; s++) {
            if (mw_status_exit_code((mw_status)s) != code)
                continue;
            if (n++)
                fputs("; ", f);
            else
                fprintf(f, "  %-7d", code);
            fputs(mw_status_desc((mw_status)s), f);
        }
        if (n)
            fputc('\n', f);
    }
    fprintf(
        f,
        "  %d+N  ended at once by signal N, unsaved (143 SIGTERM, 130 SIGINT; docs/running.md)\n",
        MW_PREEMPT_SIGNAL_EXIT);
}

void mw_cli_usage(FILE *f)
{
    fprintf(f, "usage: mwtrain <command> [flags]\n"
               "\n"
               "Synchronous data-parallel training (TensorFlow's MultiWorkerMirroredStrategy,\n"
               "natively in C). Run it alone, or under mpirun for several ranks.\n"
               "\n"
               "commands:\n"
               "  train      train the model on a data set (Fashion-MNIST by default; --data)\n"
               "  eval       evaluate the latest checkpoint on the test set\n"
               "  export     write the latest checkpoint as safetensors, .keras or .weights.h5\n"
               "  cluster    print how the ranks map to tasks, nodes and roles, then exit\n"
               "  summary    print the model's layers, output shapes and parameter counts\n"
               "  tf-config  print TF_CONFIG for each task of an Open MPI hostfile\n"
               "  help       show this help, or `mwtrain help <command>`\n"
               "  version    print the version and the compiled-in backends\n"
               "\n"
               "`mwtrain <command> --help` lists the flags of a command.\n"
               "\n");
    print_exit_codes(f);
}

/* Help text starts in this column (0-based) and lines end by this one. */
enum { HELP_COL = 31, HELP_WIDTH = 100 };

/* "  --name METAVAR" (a choice's "--name a|b|c", from its table) padded to HELP_COL (on a
 * line of its own when longer), then the help wrapped at spaces, continuation lines indented
 * to HELP_COL. */
static void print_flag(FILE *f, const flag *fl)
{
    char left[160];
    if (fl->choices) {
        snprintf(left, sizeof left, "--%s ", fl->name);
        for (int i = 0; fl->choices[i]; i++)
            snprintf(left + strlen(left), sizeof left - strlen(left), "%s%s", i ? "|" : "",
                     fl->choices[i]);
    } else if (fl->metavar) {
        snprintf(left, sizeof left, "--%s %s", fl->name, fl->metavar);
    } else {
        snprintf(left, sizeof left, "--%s", fl->name);
    }
    int col = fprintf(f, "  %s", left);
    if (col >= HELP_COL) {
        fputc('\n', f);
        col = 0;
    }
    for (const char *s = fl->help; *s;) {
        size_t n = strlen(s), room = HELP_WIDTH - HELP_COL;
        if (n > room) {
            /* the last space that fits; a longer word than the room goes out whole */
            n = room;
            while (n > 0 && s[n] != ' ')
                n--;
            if (n == 0)
                n = strcspn(s, " ");
        }
        fprintf(f, "%*s%.*s\n", HELP_COL - col, "", (int)n, s);
        col = 0;
        for (s += n; *s == ' '; s++)
            ;
    }
}

void mw_cli_help(FILE *f, mw_cmd cmd)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (commands[i].cmd == cmd) {
            fprintf(f, "usage: %s\n\n%s\n\nflags:\n", commands[i].usage, commands[i].about);
            for (int j = 0; j < NFLAGS; j++)
                if (flags[j].cmds & commands[i].mask)
                    print_flag(f, &flags[j]);
            return;
        }
    mw_cli_usage(f);
}

/* ---- values: every error names the flag, the value and what was expected ---- */

/* Plain decimal: [+-]digits, and with `frac` also [.digits] and an exponent [eE][+-]digits;
 * at least one digit before the exponent. strtod alone also takes hex (0x10), "inf", "nan"
 * and leading spaces; strtol takes leading spaces. */
static int is_decimal(const char *s, int frac)
{
    static const char digits[] = "0123456789";
    if (*s == '+' || *s == '-')
        s++;
    size_t n = strspn(s, digits);
    s += n;
    if (frac && *s == '.') {
        size_t m = strspn(s + 1, digits);
        s += 1 + m;
        n += m;
    }
    if (n == 0)
        return 0;
    if (frac && (*s == 'e' || *s == 'E')) {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        n = strspn(s, digits);
        if (n == 0)
            return 0;
        s += n;
    }
    return *s == '\0';
}

static mw_status parse_int(const flag *f, const char *v, int *out)
{
    if (!is_decimal(v, 0))
        return mw_err(MW_EINVAL, "--%s '%s': expected an integer", f->name, v);
    long x = strtol(v, NULL, 10); /* beyond long it saturates, which the range check reports */
    if (x < f->lo || x > f->hi)
        return mw_err(MW_EINVAL, "--%s %s: expected a value from %ld to %ld", f->name, v,
                      (long)f->lo, (long)f->hi);
    *out = (int)x;
    return MW_OK;
}

static mw_status parse_u64(const flag *f, const char *v, uint64_t *out)
{
    if (!is_decimal(v, 0) || v[0] == '-')
        return mw_err(MW_EINVAL, "--%s '%s': expected a non-negative integer", f->name, v);
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno == ERANGE)
        return mw_err(MW_EINVAL, "--%s %s: expected a value from 0 to %llu", f->name, v,
                      (unsigned long long)UINT64_MAX);
    *out = x;
    return MW_OK;
}

/* A value at an OPEN_LO end gets "> lo"; other values out of range get the interval. */
static mw_status parse_double(const flag *f, const char *v, double *out)
{
    if (!is_decimal(v, 1))
        return mw_err(MW_EINVAL,
                      "--%s '%s': expected a number in decimal notation (such as "
                      "0.5 or 1e-3)",
                      f->name, v);
    double x = strtod(v, NULL); /* overflow gives +-HUGE_VAL, which the range check reports */
    if ((f->open & OPEN_LO) && x == f->lo)
        return mw_err(MW_EINVAL, "--%s %s: expected a value > %g", f->name, v, f->lo);
    if (x < f->lo || x > f->hi || ((f->open & OPEN_HI) && x == f->hi))
        return mw_err(MW_EINVAL, "--%s %s: expected a value in [%g, %g%c", f->name, v, f->lo, f->hi,
                      (f->open & OPEN_HI) ? ')' : ']');
    *out = x;
    return MW_OK;
}

static mw_status parse_choice(const flag *f, const char *v, int *out)
{
    for (int i = 0; f->choices[i]; i++)
        if (!strcmp(v, f->choices[i])) {
            *out = i;
            return MW_OK;
        }
    char list[256] = "";
    for (int i = 0; f->choices[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 f->choices[i]);
    return mw_err(MW_EINVAL, "--%s '%s': expected one of %s", f->name, v, list);
}

/* An output file is written at the end of a run (after training, say), so its directory is
 * checked now: a typo then fails at once, with the reason; what is there already must be a
 * regular file (--dump-weights /dev/full, --output /dev/null are refused now, not after the
 * run). Every rank that parses checks; the
 * chief writes the file, but the other ranks' view of the path is expected to be the same. */
static mw_status check_output(const flag *f, const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof dir)
        return mw_err(MW_EINVAL, "--%s '%.64s...': %s; expected a shorter path", f->name, path,
                      strerror(ENAMETOOLONG));
    if (n == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    struct stat st;
    const char *why = NULL;
    if (stat(dir, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = strerror(ENOTDIR);
    else if (access(dir, W_OK | X_OK) != 0)
        why = strerror(errno);
    if (why)
        return mw_err(MW_EINVAL,
                      "--%s '%s': directory '%s': %s; expected a file in an existing, "
                      "writable directory",
                      f->name, path, dir, why);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return mw_err(MW_EINVAL, "--%s '%s': %s; expected a file name", f->name, path,
                      strerror(EISDIR));
    /* only a regular file is ever replaced or written into: never a FIFO, device or socket */
    const char *what = mw_fs_output_kind(path);
    if (what)
        return mw_err(MW_EINVAL,
                      "--%s '%s': is %s; expected a regular file or a new name (only a regular "
                      "file is ever replaced)",
                      f->name, path, what);
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
        return mw_err(MW_EINVAL, "--%s '%s': %s; expected a writable file", f->name, path,
                      strerror(errno));
    return MW_OK;
}

/* Check v and store it in the row's field of c. */
static mw_status set_flag(mw_cli *c, const flag *f, const char *v)
{
    void *field = (char *)c + f->off;
    int i = 0;
    switch (f->kind) {
    case K_SWITCH:
        memcpy(field, &f->on, sizeof f->on);
        return MW_OK;
    case K_INT:
        return parse_int(f, v, field);
    case K_U64:
        return parse_u64(f, v, field);
    case K_DOUBLE:
        return parse_double(f, v, field);
    case K_PATH:
    case K_OUTPUT:
        if (!*v)
            return mw_err(MW_EINVAL, "--%s: expected %s, got an empty value", f->name,
                          f->expect                     ? f->expect
                          : !strcmp(f->metavar, "DIR")  ? "a directory"
                          : !strcmp(f->metavar, "PATH") ? "a file or a directory"
                                                        : "a file");
        if (f->kind == K_OUTPUT)
            MW_TRY(check_output(f, v));
        /* fall through */
    case K_STRING:
        memcpy(field, &v, sizeof v);
        return MW_OK;
    case K_CHOICE:
        MW_TRY(parse_choice(f, v, &i));
        memcpy(field, &i, sizeof i);
        return MW_OK;
    case K_NAME:
        MW_TRY(parse_choice(f, v, &i));
        memcpy(field, &f->choices[i], sizeof f->choices[i]);
        return MW_OK;
    }
    return mw_err(MW_EINTERNAL, "--%s: flag kind %d", f->name, (int)f->kind);
}

/* ---- the command line ---- */

/* The row named by the first len bytes of name among the flags of the commands in mask. */
static const flag *find_flag(const char *name, size_t len, unsigned mask)
{
    for (int i = 0; i < NFLAGS; i++)
        if ((flags[i].cmds & mask) && strlen(flags[i].name) == len &&
            !strncmp(flags[i].name, name, len))
            return &flags[i];
    return NULL;
}

/* tok (its first len bytes) is no flag of cmd. getopt_long would take a unique prefix (--epoch
 * for --epochs); we do not, so scripts never depend on an abbreviation a new flag breaks, but
 * we name the flag meant. */
static mw_status unknown_flag(const char *tok, size_t len, unsigned mask, const char *cmd)
{
    const flag *meant = NULL;
    int n = 0;
    if (len > 2 && !strncmp(tok, "--", 2))
        for (int i = 0; i < NFLAGS; i++)
            if ((flags[i].cmds & mask) && !strncmp(flags[i].name, tok + 2, len - 2)) {
                meant = &flags[i];
                n++;
            }
    if (n == 1)
        return mw_err(MW_EINVAL,
                      "unknown flag '%.*s' (did you mean '--%s'? see `mwtrain %s "
                      "--help`)",
                      (int)len, tok, meant->name, cmd);
    return mw_err(MW_EINVAL, "unknown flag '%.*s' (see `mwtrain %s --help`)", (int)len, tok, cmd);
}

/* argv[0] is the command, mask its C_* bit. Special cases kept as code, as no row can say them:
 * -h (a short name), `--` (ends the flags), and a flag name given as a value (the flag before
 * it most likely lost its value: `--summary-dir --epochs 1`); `--flag=value` always takes the
 * value as written. */
/* --optimizer-config FILE or the shorthand flags, never both; which were given is recorded
 * for mw_optimizer_resolve (worker/keras/optimizer.h), which reads the files after parsing. */
static mw_status optimizer_flags(mw_train_opts *o, const unsigned char *seen)
{
    static const char *const shorthands[] = {"optimizer", "learning-rate", "momentum"};
    for (int j = 0; j < NFLAGS; j++)
        for (size_t k = 0; k < 3; k++)
            if (seen[j] && !strcmp(flags[j].name, shorthands[k])) {
                if (o->optimizer_config)
                    return mw_err(MW_EINVAL,
                                  "--%s and --optimizer-config %s: give the optimizer one way "
                                  "(put the value in the config)",
                                  shorthands[k], o->optimizer_config);
                o->optimizer_given = 1;
                o->momentum_given |= k == 2;
            }
    return MW_OK;
}

static mw_status parse_flags(mw_cli *c, unsigned mask, int argc, char **argv)
{
    const char *cmd = argv[0];
    unsigned char seen[NFLAGS] = {0}; /* per flag: given */
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *tok = argv[i];
        if (!strcmp(tok, "-h")) {
            c->help = 1;
            continue;
        }
        if (tok[0] != '-' || tok[1] == '\0')
            break;
        const char *eq = strchr(tok, '=');
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        const flag *f = tok[1] == '-' ? find_flag(tok + 2, len - 2, mask) : NULL;
        if (!f)
            return unknown_flag(tok, tok[1] == '-' ? len : strlen(tok), mask, cmd);
        const char *v = eq ? eq + 1 : NULL;
        if (!f->metavar && v)
            return mw_err(MW_EINVAL, "--%s '%s': expected no value (--%s is a switch)", f->name, v,
                          f->name);
        if (f->metavar && !v) {
            if (i + 1 == argc)
                return mw_err(MW_EINVAL, "flag '%s' needs a value (see `mwtrain %s --help`)", tok,
                              cmd);
            v = argv[++i];
            /* any command's flag: `eval --checkpoint-dir --resume` is a slip, not a path */
            const flag *g =
                !strncmp(v, "--", 2) ? find_flag(v + 2, strcspn(v + 2, "="), C_ALL) : NULL;
            if (g)
                return mw_err(MW_EINVAL,
                              "--%s: missing value (got the flag --%s); expected --%s %s", f->name,
                              g->name, f->name, f->metavar);
        }
        MW_TRY(set_flag(c, f, v));
        seen[f - flags] = 1;
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i < argc)
        return mw_err(MW_EINVAL, "unexpected argument '%s' (see `mwtrain %s --help`)", argv[i],
                      cmd);
    for (int j = 0; !c->help && j < NFLAGS; j++)
        if ((flags[j].required & mask) && !seen[j])
            return mw_err(MW_EINVAL, "%s needs --%s %s (see `mwtrain %s --help`)", cmd,
                          flags[j].name, flags[j].metavar, cmd);
    return c->help ? MW_OK : optimizer_flags(&c->train, seen);
}

mw_status mw_cli_parse(mw_cli *c, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    c->log_level = -1;
    c->port = 2222;
    mw_train_opts_default(&c->train);
    if (argc < 2) {
        c->cmd = MW_CMD_NONE;
        return mw_err(MW_EINVAL, "no command given (try `mwtrain --help`)");
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        c->cmd = MW_CMD_HELP;
        for (int i = 0; argc > 2 && i < NCOMMANDS; i++)
            if (!strcmp(argv[2], commands[i].name))
                c->cmd = commands[i].cmd, c->help = 1;
        return MW_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        c->cmd = MW_CMD_VERSION;
        return MW_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) {
            c->cmd = commands[i].cmd;
            return parse_flags(c, commands[i].mask, argc - 1, argv + 1);
        }
    if (cmd[0] == '-')
        return mw_err(MW_EINVAL, "flag '%s' before the command; usage: mwtrain <command> [flags]",
                      cmd);
    return mw_err(MW_EINVAL,
                  "unknown command '%s'; commands: train, eval, export, cluster, "
                  "summary, tf-config, help, version",
                  cmd);
}
