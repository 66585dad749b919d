/* Flag tables, parsing and help for the mwtrain command line. */
#include "worker/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/data.h"

/* which commands take a flag */
enum { C_TRAIN = 1, C_EVAL = 2, C_EXPORT = 4, C_CLUSTER = 8, C_SUMMARY = 16, C_TFCONF = 32 };

typedef struct {
    const char *name;
    const char *metavar; /* NULL: no argument */
    const char *help;
} flag;

enum {
    F_EPOCHS,
    F_BATCH,
    F_REPLICAS,
    F_STEPS,
    F_MICRO,
    F_LR,
    F_OPT,
    F_MOMENTUM,
    F_SEED,
    F_DATA,
    F_THREADS,
    F_BACKEND,
    F_PROGRESS,
    F_PROGRESS_INTERVAL,
    F_DUMP,
    F_TF_CONFIG,
    F_ALLREDUCE,
    F_TIMEOUT,
    F_CKPT_DIR,
    F_CKPT_EPOCHS,
    F_CKPT_STEPS,
    F_KEEP,
    F_RESUME,
    F_SUMMARY_DIR,
    F_TEST_EXAMPLES,
    F_OUTPUT,
    F_JSON,
    F_HOSTFILE,
    F_TASK,
    F_PORT,
    F_MODEL,
    F_DEVICE,
    F_QUIET,
    F_VERBOSE,
    F_HELP,
    F_COUNT
};

static const flag flags[F_COUNT] = {
    [F_EPOCHS] = {"epochs", "N", "passes over the training set (default 10)"},
    [F_BATCH] = {"batch-per-replica", "N",
                 "examples per replica per step; global batch = N x replicas (default 64)"},
    [F_REPLICAS] = {"replicas-per-worker", "R",
                    "model replicas per rank; on GPUs a multiple of the GPUs the rank drives "
                    "(default: one per GPU, 1 on the CPU)"},
    [F_STEPS] = {"steps-per-epoch", "N",
                 "stop each epoch after N steps, for quick runs (default: whole set)"},
    [F_MICRO] = {"micro-batch", "N",
                 "examples per forward/backward pass inside a CPU thread; gradients add up "
                 "over the replica's slice, so only float rounding changes (default 16: fits "
                 "the caches; a GPU runs a replica's slice at once, up to 1024)"},
    [F_LR] = {"learning-rate", "X", "optimizer learning rate (default 0.001)"},
    [F_OPT] = {"optimizer", "adam|sgd", "Adam (Keras defaults) or SGD with momentum (default adam)"},
    [F_MOMENTUM] = {"momentum", "X", "SGD momentum in [0, 1) (default 0.9)"},
    [F_SEED] = {"seed", "N", "seed of initial weights and the shuffle (default 42)"},
    [F_DATA] = {"data-dir", "DIR",
                "directory with the IDX files (train-images-idx3-ubyte[.gz], ...) "
                "(default " MW_DATA_DEFAULT_DIR ")"},
    [F_THREADS] = {"threads", "N", "compute threads per rank (default: cores / ranks on the node)"},
    [F_BACKEND] = {"backend", "cpu|ref", "kernels: fast CPU path or the plain reference (default cpu)"},
    [F_PROGRESS] = {"progress", "auto|bar|lines|none",
                    "progress during an epoch: a bar on a terminal, else lines (default auto)"},
    [F_PROGRESS_INTERVAL] = {"progress-interval", "SECONDS",
                             "seconds between progress lines (default 5)"},
    [F_DUMP] = {"dump-weights", "FILE", "write the final parameters as raw float32 (for tests)"},
    [F_TF_CONFIG] = {"tf-config", "FILE",
                     "TF_CONFIG JSON file (default: the TF_CONFIG environment variable; "
                     "neither: all ranks are workers)"},
    [F_ALLREDUCE] = {"allreduce", "auto|ring|hierarchical|mpi",
                     "gradient all-reduce algorithm (default auto: hierarchical when a node has "
                     "several ranks, else ring, MPI below 64 KiB)"},
    [F_TIMEOUT] = {"collective-timeout", "SECONDS",
                   "abort the job (exit 131) when a collective waits longer (default 300)"},
    [F_CKPT_DIR] = {"checkpoint-dir", "DIR",
                    "checkpoints (ckpt-N and a `checkpoint` index), written by the chief only "
                    "(default ./training_checkpoints)"},
    [F_CKPT_EPOCHS] = {"checkpoint-every-epochs", "N",
                       "save after epochs 1, 1+N, 1+2N, ... and after the last; 0: never "
                       "(default 2, as the tutorial)"},
    [F_CKPT_STEPS] = {"checkpoint-every-steps", "N", "also save every N steps (default 0: off)"},
    [F_KEEP] = {"keep-checkpoints", "N", "keep the newest N checkpoints; 0 keeps all (default 5)"},
    [F_RESUME] = {"resume", NULL,
                  "continue from the latest valid checkpoint (read by the chief, broadcast); "
                  "starts from scratch when the directory has none yet"},
    [F_SUMMARY_DIR] = {"summary-dir", "DIR",
                       "TensorBoard event file and metrics.csv, written by the chief; \"\" "
                       "disables (default ./logs)"},
    [F_TEST_EXAMPLES] = {"test-examples", "N",
                         "evaluate on the first N test examples only (default: all)"},
    [F_OUTPUT] = {"output", "FILE", "where to write the safetensors file (required)"},
    [F_JSON] = {"json", NULL, "one JSON object instead of the table"},
    [F_HOSTFILE] = {"hostfile", "FILE", "Open MPI hostfile: one worker task per slot (required)"},
    [F_TASK] = {"task", "worker:I", "print only this task's TF_CONFIG"},
    [F_PORT] = {"port", "P", "first port of each host's tasks (default 2222)"},
    [F_MODEL] = {"model", "FILE", "Keras Sequential model JSON (model.to_json()); default: "
                 "the tutorial CNN, or with --resume the model saved in the checkpoint"},
    [F_DEVICE] = {"device", "auto|cpu|gpu",
                  "where to train: auto uses the CPU when no CUDA device is found and says "
                  "so; gpu without a device is an error (default auto)"},
    [F_QUIET] = {"quiet", NULL, "only warnings and errors on stderr"},
    [F_VERBOSE] = {"verbose", NULL, "debug messages on stderr"},
    [F_HELP] = {"help", NULL, "show this help"},
};

/* Which command takes which flag. */
static unsigned flag_cmds(int f)
{
    switch (f) {
    case F_TF_CONFIG:
        return C_TRAIN | C_EVAL | C_EXPORT | C_CLUSTER;
    case F_CKPT_DIR:
        return C_TRAIN | C_EVAL | C_EXPORT;
    case F_DATA:
    case F_THREADS:
    case F_BACKEND:
    case F_TEST_EXAMPLES:
    case F_BATCH:
    case F_MICRO:
    case F_TIMEOUT:
        return C_TRAIN | C_EVAL;
    case F_DEVICE:
        return C_TRAIN | C_EVAL | C_CLUSTER;
    case F_OUTPUT:
        return C_EXPORT;
    case F_JSON:
        return C_CLUSTER;
    case F_HOSTFILE:
    case F_TASK:
    case F_PORT:
        return C_TFCONF;
    case F_MODEL:
        return C_TRAIN | C_SUMMARY;
    case F_QUIET:
    case F_VERBOSE:
    case F_HELP:
        return ~0u;
    default:
        return C_TRAIN;
    }
}

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
     "Write the latest checkpoint's weights as safetensors (Keras names and layouts,\n"
     "see docs/formats.md)."},
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

void mw_cli_usage(FILE *f)
{
    fprintf(f,
            "usage: mwtrain <command> [flags]\n"
            "\n"
            "Synchronous data-parallel training (TensorFlow's MultiWorkerMirroredStrategy,\n"
            "natively in C). Run it alone, or under mpirun for several ranks.\n"
            "\n"
            "commands:\n"
            "  train      train the model on an IDX data set (Fashion-MNIST by default)\n"
            "  eval       evaluate the latest checkpoint on the test set\n"
            "  export     write the latest checkpoint's weights as safetensors\n"
            "  cluster    print how the ranks map to tasks, nodes and roles, then exit\n"
            "  summary    print the model's layers, output shapes and parameter counts\n"
            "  tf-config  print TF_CONFIG for each task of an Open MPI hostfile\n"
            "  help       show this help, or `mwtrain help <command>`\n"
            "  version    print the version and the compiled-in backends\n"
            "\n"
            "`mwtrain <command> --help` lists the flags of a command.\n"
            "Exit codes: 0 success; 1 internal; 2 bad flags, configuration or model;\n"
            "3 bad data; 4 I/O; 5 bad checkpoint; 6 out of memory; 7 device;\n"
            ">= 128 worth a restart (129 MPI, 130 peer lost, 131 timeout).\n");
}

static void print_flags(FILE *f, unsigned mask)
{
    for (int i = 0; i < F_COUNT; i++) {
        if (!(flag_cmds(i) & mask))
            continue;
        char left[64];
        if (flags[i].metavar)
            snprintf(left, sizeof left, "--%s %s", flags[i].name, flags[i].metavar);
        else
            snprintf(left, sizeof left, "--%s", flags[i].name);
        if (strlen(left) > 28)
            fprintf(f, "  %s\n  %-28s %s\n", left, "", flags[i].help);
        else
            fprintf(f, "  %-28s %s\n", left, flags[i].help);
    }
}

void mw_cli_help(FILE *f, mw_cmd cmd)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (commands[i].cmd == cmd) {
            fprintf(f, "usage: %s\n\n%s\n\nflags:\n", commands[i].usage, commands[i].about);
            print_flags(f, commands[i].mask);
            return;
        }
    mw_cli_usage(f);
}

/* ---- value parsing: every error names the flag and the value ---- */

static mw_status parse_int(const char *flagname, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return mw_err(MW_EINVAL, "--%s '%s': expected an integer", flagname, s);
    if (v < lo || v > hi)
        return mw_err(MW_EINVAL, "--%s %ld: expected a value from %ld to %ld", flagname, v, lo,
                      hi);
    *out = (int)v;
    return MW_OK;
}

static mw_status parse_double(const char *flagname, const char *s, double lo, double hi,
                              int hi_open, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || v != v)
        return mw_err(MW_EINVAL, "--%s '%s': expected a number", flagname, s);
    if (v < lo || v > hi || (hi_open && v >= hi))
        return mw_err(MW_EINVAL, "--%s %s: expected a value in [%g, %g%c", flagname, s, lo, hi,
                      hi_open ? ')' : ']');
    *out = v;
    return MW_OK;
}

static mw_status parse_choice(const char *flagname, const char *s, const char *const *names,
                              int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return MW_OK;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return mw_err(MW_EINVAL, "--%s '%s': expected one of %s", flagname, s, list);
}

static mw_status parse_flags(mw_cli *c, unsigned mask, int argc, char **argv)
{
    struct option lo[F_COUNT + 1];
    int nlo = 0;
    for (int i = 0; i < F_COUNT; i++)
        if (flag_cmds(i) & mask)
            lo[nlo++] = (struct option){flags[i].name,
                                        flags[i].metavar ? required_argument : no_argument, NULL,
                                        1000 + i};
    lo[nlo] = (struct option){0, 0, 0, 0};
    mw_train_opts *o = &c->train;
    optind = 0; /* 0, not 1: glibc then also resets its internal state */
    opterr = 0;
    for (;;) {
        int longi = -1;
        int id = getopt_long(argc, argv, ":h", lo, &longi);
        if (id == -1)
            break;
        if (id == '?')
            return mw_err(MW_EINVAL, "unknown flag '%s' (see `mwtrain %s --help`)",
                          argv[optind - 1], argv[0]);
        if (id == ':')
            return mw_err(MW_EINVAL, "flag '%s' needs a value (see `mwtrain %s --help`)",
                          argv[optind - 1], argv[0]);
        if (id == 'h') {
            c->help = 1;
            continue;
        }
        int f = id - 1000;
        const char *name = flags[f].name, *v = optarg;
        /* getopt_long accepts unique prefixes (--epoch for --epochs); we do
         * not, so scripts never depend on an abbreviation a new flag breaks */
        const char *tok = argv[optind - 1];
        if (v && tok == v && optind >= 2)
            tok = argv[optind - 2];
        size_t tl = strcspn(tok + 2, "=");
        if (strncmp(tok, "--", 2) != 0 || tl != strlen(name) || strncmp(tok + 2, name, tl) != 0)
            return mw_err(MW_EINVAL, "unknown flag '%.*s' (did you mean '--%s'? see `mwtrain %s "
                          "--help`)", (int)(tl + 2), tok, name, argv[0]);
        int tmp = 0;
        switch (f) {
        case F_EPOCHS:
            MW_TRY(parse_int(name, v, 0, 1000000, &o->epochs));
            break;
        case F_BATCH:
            MW_TRY(parse_int(name, v, 1, 65536, &o->batch_per_replica));
            break;
        case F_REPLICAS:
            MW_TRY(parse_int(name, v, 1, 1024, &o->replicas_per_worker));
            break;
        case F_STEPS:
            MW_TRY(parse_int(name, v, 1, INT_MAX, &o->steps_per_epoch));
            break;
        case F_MICRO:
            MW_TRY(parse_int(name, v, 1, 65536, &o->micro_batch));
            break;
        case F_LR:
            MW_TRY(parse_double(name, v, 0, 1e6, 0, &o->learning_rate));
            if (o->learning_rate <= 0)
                return mw_err(MW_EINVAL, "--%s %s: expected a value > 0", name, v);
            break;
        case F_OPT: {
            static const char *const names[] = {"adam", "sgd"};
            MW_TRY(parse_choice(name, v, names, 2, &tmp));
            o->optimizer = (mw_optimizer)tmp;
            break;
        }
        case F_MOMENTUM:
            MW_TRY(parse_double(name, v, 0, 1, 1, &o->momentum));
            break;
        case F_SEED: {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end != '\0' || v[0] == '-')
                return mw_err(MW_EINVAL, "--%s '%s': expected a non-negative integer", name, v);
            o->seed = s;
            break;
        }
        case F_DATA:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a directory, got an empty value", name);
            o->data_dir = v;
            break;
        case F_THREADS:
            MW_TRY(parse_int(name, v, 1, 1024, &o->threads));
            break;
        case F_BACKEND: {
            static const char *const names[] = {"cpu", "ref"};
            MW_TRY(parse_choice(name, v, names, 2, &tmp));
            o->backend = names[tmp];
            break;
        }
        case F_PROGRESS: {
            static const char *const names[] = {"auto", "bar", "lines", "none"};
            MW_TRY(parse_choice(name, v, names, 4, &tmp));
            o->progress = (mw_progress)tmp;
            break;
        }
        case F_PROGRESS_INTERVAL:
            MW_TRY(parse_double(name, v, 0.01, 86400, 0, &o->progress_interval));
            break;
        case F_DUMP:
            o->dump_weights = v;
            break;
        case F_TF_CONFIG:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a file, got an empty value", name);
            o->tf_config = v;
            break;
        case F_ALLREDUCE:
            MW_TRY(mw_ar_algo_parse(v, &o->allreduce));
            break;
        case F_TIMEOUT:
            MW_TRY(parse_double(name, v, 0.1, 1e7, 0, &o->collective_timeout));
            break;
        case F_CKPT_DIR:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a directory, got an empty value", name);
            o->checkpoint_dir = v;
            break;
        case F_CKPT_EPOCHS:
            MW_TRY(parse_int(name, v, 0, 1000000, &o->checkpoint_every_epochs));
            break;
        case F_CKPT_STEPS:
            MW_TRY(parse_int(name, v, 0, INT_MAX, &o->checkpoint_every_steps));
            break;
        case F_KEEP:
            MW_TRY(parse_int(name, v, 0, 1000000, &o->keep_checkpoints));
            break;
        case F_RESUME:
            o->resume = 1;
            break;
        case F_SUMMARY_DIR:
            o->summary_dir = v;
            break;
        case F_TEST_EXAMPLES:
            MW_TRY(parse_int(name, v, 1, INT_MAX, &o->test_examples));
            break;
        case F_OUTPUT:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a file, got an empty value", name);
            o->export_path = v;
            break;
        case F_JSON:
            c->json = 1;
            break;
        case F_HOSTFILE:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a file, got an empty value", name);
            c->hostfile = v;
            break;
        case F_TASK:
            c->task = v;
            break;
        case F_PORT:
            MW_TRY(parse_int(name, v, 1, 65535, &c->port));
            break;
        case F_MODEL:
            if (!*v)
                return mw_err(MW_EINVAL, "--%s: expected a file, got an empty value", name);
            o->model_path = v;
            break;
        case F_DEVICE: {
            static const char *const names[] = {"auto", "cpu", "gpu"};
            MW_TRY(parse_choice(name, v, names, 3, &tmp));
            o->device = names[tmp];
            break;
        }
        case F_QUIET:
            c->log_level = MW_LOG_WARN;
            break;
        case F_VERBOSE:
            c->log_level = MW_LOG_DEBUG;
            break;
        case F_HELP:
            c->help = 1;
            break;
        }
    }
    if (optind < argc)
        return mw_err(MW_EINVAL, "unexpected argument '%s' (see `mwtrain %s --help`)",
                      argv[optind], argv[0]);
    return MW_OK;
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
            MW_TRY(parse_flags(c, commands[i].mask, argc - 1, argv + 1));
            if (c->help)
                return MW_OK;
            if (c->cmd == MW_CMD_EXPORT && !c->train.export_path)
                return mw_err(MW_EINVAL, "export needs --output FILE (see `mwtrain export "
                              "--help`)");
            if (c->cmd == MW_CMD_TFCONFIG && !c->hostfile)
                return mw_err(MW_EINVAL, "tf-config needs --hostfile FILE (see `mwtrain "
                              "tf-config --help`)");
            return MW_OK;
        }
    if (cmd[0] == '-')
        return mw_err(MW_EINVAL, "flag '%s' before the command; usage: mwtrain <command> [flags]",
                      cmd);
    return mw_err(MW_EINVAL, "unknown command '%s'; commands: train, eval, export, cluster, "
                  "summary, tf-config, help, version", cmd);
}
