/* Command-line parsing: defaults, every flag, and a table of bad command
 * lines, each with the message it must produce. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/allreduce.h"
#include "tests/util.h"
#include "worker/cli.h"

static mw_status parse(mw_cli *c, const char *line)
{
    char buf[512], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "mwtrain";
    for (char *tok = strtok(buf, " "); tok && argc < 31; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    mw_err_clear();
    return mw_cli_parse(c, argc, argv);
}

/* argv given word by word (for values with spaces or empty ones); argv[0] is added. */
static mw_status parse_argv(mw_cli *c, int argc, const char *const *args)
{
    char *argv[32] = {"mwtrain"};
    for (int i = 0; i < argc && i < 30; i++)
        argv[i + 1] = (char *)args[i];
    mw_err_clear();
    return mw_cli_parse(c, argc + 1, argv);
}

/* Fail unless s is MW_EINVAL with exactly the message want. */
static void expect_msg(mw_status s, const char *what, const char *want)
{
    if (s != MW_EINVAL || strcmp(mw_err_msg(), want) != 0)
        fail_msg("`mwtrain %s`: got status %s and message\n  \"%s\"\nexpected MW_EINVAL and\n  "
                 "\"%s\"",
                 what, mw_status_str(s), mw_err_msg(), want);
    mw_err_clear();
}

static void defaults(void **state)
{
    (void)state;
    mw_cli c;
    assert_int_equal(parse(&c, "train"), MW_OK);
    assert_int_equal(c.cmd, MW_CMD_TRAIN);
    assert_int_equal(c.train.epochs, 10);
    assert_int_equal(c.train.batch_per_replica, 64);
    assert_int_equal(c.train.replicas_per_worker, 0); /* auto: resolved by the trainer */
    assert_true(c.train.learning_rate == 1e-3);
    assert_int_equal(c.train.optimizer, MW_OPT_ADAM);
    assert_string_equal(c.train.data_dir, "/usr/share/datasets/fashion-mnist");
    assert_int_equal(c.train.steps_per_epoch, 0);
}

static void all_flags(void **state)
{
    (void)state;
    mw_cli c;
    assert_int_equal(parse(&c, "train --epochs 3 --batch-per-replica 32 --replicas-per-worker 2 "
                               "--steps-per-epoch 5 --learning-rate 0.01 --optimizer sgd "
                               "--momentum 0.5 --seed 9 --data-dir /d --threads 2 --backend ref "
                               "--progress lines --progress-interval 2.5 --dump-weights w.bin "
                               "--quiet"),
                     MW_OK);
    assert_int_equal(c.train.epochs, 3);
    assert_int_equal(c.train.batch_per_replica, 32);
    assert_int_equal(c.train.replicas_per_worker, 2);
    assert_int_equal(c.train.steps_per_epoch, 5);
    assert_true(c.train.learning_rate == 0.01);
    assert_int_equal(c.train.optimizer, MW_OPT_SGD);
    assert_true(c.train.momentum == 0.5);
    assert_int_equal(c.train.seed, 9);
    assert_string_equal(c.train.data_dir, "/d");
    assert_int_equal(c.train.threads, 2);
    assert_string_equal(c.train.backend, "ref");
    assert_int_equal(c.train.progress, MW_PROGRESS_LINES);
    assert_true(c.train.progress_interval == 2.5);
    assert_string_equal(c.train.dump_weights, "w.bin");
    assert_int_equal(c.log_level, 0 + 1); /* MW_LOG_WARN */
    assert_int_equal(parse(&c, "train --epochs=4"), MW_OK);
    assert_int_equal(c.train.epochs, 4);
}

static void help_and_version(void **state)
{
    (void)state;
    mw_cli c;
    assert_int_equal(parse(&c, "--help"), MW_OK);
    assert_int_equal(c.cmd, MW_CMD_HELP);
    assert_int_equal(parse(&c, "train --help"), MW_OK);
    assert_true(c.help && c.cmd == MW_CMD_TRAIN);
    assert_int_equal(parse(&c, "help train"), MW_OK);
    assert_true(c.help && c.cmd == MW_CMD_TRAIN);
    assert_int_equal(parse(&c, "--version"), MW_OK);
    assert_int_equal(c.cmd, MW_CMD_VERSION);
    assert_int_equal(parse(&c, "summary"), MW_OK);
    assert_int_equal(c.cmd, MW_CMD_SUMMARY);
    assert_int_equal(parse(&c, "help eval"), MW_OK);
    assert_true(c.help && c.cmd == MW_CMD_EVAL);
    assert_int_equal(parse(&c, "cluster --json --tf-config t.json"), MW_OK);
    assert_true(c.cmd == MW_CMD_CLUSTER && c.json);
    assert_string_equal(c.train.tf_config, "t.json");
    assert_int_equal(parse(&c, "cluster --device gpu"), MW_OK);
    assert_true(c.cmd == MW_CMD_CLUSTER && !c.json);
    assert_string_equal(c.train.device, "gpu");
    assert_int_equal(parse(&c, "eval --checkpoint-dir d --test-examples 5"), MW_OK);
    assert_true(c.cmd == MW_CMD_EVAL && c.train.test_examples == 5);
    assert_string_equal(c.train.checkpoint_dir, "d");
    assert_int_equal(parse(&c, "eval --checkpoint-dir d --cuda-graphs on"), MW_OK);
    assert_true(c.cmd == MW_CMD_EVAL && c.train.cuda_graphs == 1);
    assert_int_equal(parse(&c, "export --checkpoint-dir d --output m.safetensors"), MW_OK);
    assert_string_equal(c.train.export_path, "m.safetensors");
    assert_int_equal(parse(&c, "tf-config --hostfile h --task worker:1 --port 3000"), MW_OK);
    assert_true(c.cmd == MW_CMD_TFCONFIG && c.port == 3000);
    assert_string_equal(c.hostfile, "h");
    assert_string_equal(c.task, "worker:1");
    assert_int_equal(parse(&c, "train --resume --checkpoint-every-steps 7 --keep-checkpoints 0 "
                               "--summary-dir s --checkpoint-every-epochs 3"),
                     MW_OK);
    assert_true(c.train.resume && c.train.checkpoint_every_steps == 7 &&
                c.train.keep_checkpoints == 0 && c.train.checkpoint_every_epochs == 3);
    assert_string_equal(c.train.summary_dir, "s");
}

/* The help text documents every flag the parser accepts. */
static void help_lists_every_flag(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mw_cli_help(f, MW_CMD_TRAIN);
    fclose(f);
    const char *flags[] = {"--epochs",
                           "--batch-per-replica",
                           "--replicas-per-worker",
                           "--steps-per-epoch",
                           "--learning-rate",
                           "--optimizer",
                           "--momentum",
                           "--seed",
                           "--data-dir",
                           "--threads",
                           "--backend",
                           "--progress ",
                           "--progress-interval",
                           "--dump-weights",
                           "--quiet",
                           "--verbose",
                           "--help",
                           "--tf-config",
                           "--allreduce",
                           "--collective-timeout",
                           "--overlap-allreduce",
                           "--bucket-mb",
                           "--gpu-allreduce",
                           "--checkpoint-dir",
                           "--checkpoint-every-epochs",
                           "--checkpoint-every-steps",
                           "--keep-checkpoints",
                           "--resume",
                           "--summary-dir",
                           "--test-examples",
                           "--micro-batch",
                           "--model"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strstr(buf, flags[i]))
            fail_msg("train --help does not document %s", flags[i]);
    free(buf);
}

static const struct {
    const char *line, *expect;
} bad[] = {
    {"", "no command given"},
    {"fly", "unknown command 'fly'"},
    {"--epochs 3", "flag '--epochs' before the command"},
    {"train --epoch 3", "unknown flag '--epoch'"},
    {"train -x", "unknown flag '-x'"},
    {"train --epochs", "flag '--epochs' needs a value"},
    {"train --epochs ten", "--epochs 'ten': expected an integer"},
    {"train --epochs 3x", "--epochs '3x': expected an integer"},
    {"train --epochs -1", "--epochs -1: expected a value from 0 to 1000000"},
    {"train --batch-per-replica 0", "--batch-per-replica 0: expected a value from 1 to 65536"},
    {"train --replicas-per-worker 0", "--replicas-per-worker 0: expected a value from 1"},
    {"train --steps-per-epoch 0", "--steps-per-epoch 0: expected a value from 1"},
    {"train --learning-rate abc", "--learning-rate 'abc': expected a number"},
    {"train --learning-rate 0", "--learning-rate 0: expected a value > 0"},
    {"train --learning-rate -1", "--learning-rate -1: expected a value in [0, 1e+06]"},
    {"train --optimizer lamb",
     "--optimizer 'lamb': expected one of adam, sgd, adamw, rmsprop, adagrad"},
    {"train --momentum 1", "--momentum 1: expected a value in [0, 1)"},
    {"train --seed -5", "--seed '-5': expected a non-negative integer"},
    {"train --threads 0", "--threads 0: expected a value from 1 to 1024"},
    {"train --backend gpu", "--backend 'gpu': expected one of cpu, ref"},
    {"train --progress fancy", "--progress 'fancy': expected one of auto, bar, lines, none"},
    {"train --progress-interval 0", "--progress-interval 0: expected a value in [0.01, 86400]"},
    {"train extra", "unexpected argument 'extra'"},
    {"summary --model", "flag '--model' needs a value"},
    {"summary --epochs 3", "unknown flag '--epochs'"},
    {"cluster --epochs 3", "unknown flag '--epochs'"},
    {"cluster extra", "unexpected argument 'extra'"},
    {"eval --resume", "unknown flag '--resume'"},
    {"export", "export needs --output FILE"},
    {"export --output", "flag '--output' needs a value"},
    {"tf-config", "tf-config needs --hostfile FILE"},
    {"tf-config --hostfile h --port 0", "--port 0: expected a value from 1 to 65535"},
    {"train --checkpoint-every-epochs -1", "--checkpoint-every-epochs -1: expected a value"},
    {"train --keep-checkpoints x", "--keep-checkpoints 'x': expected an integer"},
    {"train --test-examples 0", "--test-examples 0: expected a value from 1"},
    {"train --allreduce tree", "--allreduce 'tree': expected one of auto, ring, hierarchical"},
    {"train --collective-timeout 0", "--collective-timeout 0: expected a value in [0.1"},
    {"train --overlap-allreduce yes", "--overlap-allreduce 'yes': expected one of off, on"},
    {"train --cuda-graphs yes", "--cuda-graphs 'yes': expected one of off, on"},
    {"train --gpu-allreduce ring", "--gpu-allreduce 'ring': expected one of hierarchical, nccl"},
    {"train --bucket-mb -1", "--bucket-mb -1: expected a value in [0"},
    {"train --micro-batch 0", "--micro-batch 0: expected a value from 1 to 65536"},
    {"train --checkpoint-dir=", "--checkpoint-dir: expected a directory, got an empty value"},
    {"train --tf-config=", "--tf-config: expected a file, got an empty value"},
    {"train --epoch 3", "did you mean '--epochs'?"},
    {"train --classes 0", "--classes 0: expected a value from 1 to 65536"},
    {"train --label medium", "--label 'medium': expected one of fine, coarse"},
    {"train --data=", "--data: expected a file or a directory, got an empty value"},
    /* an empty name or list says what a value is, not "a file" */
    {"train --loss=", "--loss: expected a Keras loss name (e.g. sparse_categorical_crossentropy"},
    {"eval --metrics=", "--metrics: expected Keras metric names, comma-separated (e.g. accuracy"},
};

/* Numbers are plain decimal: strtod alone took --learning-rate 0x10 as 16, and "inf", "nan". */
static void numbers_are_plain_decimal(void **state)
{
    (void)state;
    static const char *const bad_numbers[] = {"0x10", "0X1p4", "inf", "-inf",  "nan", "infinity",
                                              "1e",   "e5",    ".",   "1.5.2", "+",   "1e+"};
    mw_cli c;
    char line[64], want[160];
    for (size_t i = 0; i < sizeof bad_numbers / sizeof *bad_numbers; i++) {
        snprintf(line, sizeof line, "train --learning-rate %s", bad_numbers[i]);
        snprintf(want, sizeof want,
                 "--learning-rate '%s': expected a number in decimal notation "
                 "(such as 0.5 or 1e-3)",
                 bad_numbers[i]);
        expect_msg(parse(&c, line), line, want);
    }
    expect_msg(parse(&c, "train --momentum nan"), "train --momentum nan",
               "--momentum 'nan': expected a number in decimal notation (such as 0.5 or 1e-3)");
    /* too big or too small for a double: the range says what is allowed */
    expect_msg(parse(&c, "train --learning-rate 1e999"), "train --learning-rate 1e999",
               "--learning-rate 1e999: expected a value in [0, 1e+06]");
    expect_msg(parse(&c, "train --learning-rate 1e-999"), "train --learning-rate 1e-999",
               "--learning-rate 1e-999: expected a value > 0");
    /* integers: no hex, and a value past long gets the range, not "expected an integer" */
    expect_msg(parse(&c, "train --epochs 0x10"), "train --epochs 0x10",
               "--epochs '0x10': expected an integer");
    expect_msg(parse(&c, "train --epochs 99999999999999999999"),
               "train --epochs 99999999999999999999",
               "--epochs 99999999999999999999: expected a value from 0 to 1000000");
    expect_msg(parse(&c, "train --seed 0x10"), "train --seed 0x10",
               "--seed '0x10': expected a non-negative integer");
    expect_msg(parse(&c, "train --seed 18446744073709551616"), "train --seed 18446744073709551616",
               "--seed 18446744073709551616: expected a value from 0 to 18446744073709551615");

    static const struct {
        const char *text;
        double value;
    } good[] = {{"0.5", 0.5},  {".5", 0.5},    {"5.", 5}, {"1e-3", 1e-3},
                {"1E+2", 100}, {"+2.5e1", 25}, {"007", 7}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(line, sizeof line, "train --learning-rate %s", good[i].text);
        if (parse(&c, line) != MW_OK || c.train.learning_rate != good[i].value)
            fail_msg("`mwtrain %s`: got \"%s\", learning rate %g; expected %g", line, mw_err_msg(),
                     c.train.learning_rate, good[i].value);
    }
    assert_int_equal(parse(&c, "train --seed 18446744073709551615 --epochs +3"), MW_OK);
    assert_true(c.train.seed == UINT64_MAX && c.train.epochs == 3);
}

/* A flag that takes a value does not swallow the next flag: `--summary-dir --steps-per-epoch 1`
 * once set the summary directory to "--steps-per-epoch" and then failed on "1". */
static void flag_name_is_no_value(void **state)
{
    (void)state;
    mw_cli c;
    expect_msg(parse(&c, "train --summary-dir --steps-per-epoch 1"),
               "train --summary-dir --steps-per-epoch 1",
               "--summary-dir: missing value (got the flag --steps-per-epoch); expected "
               "--summary-dir DIR");
    expect_msg(parse(&c, "train --epochs --resume"), "train --epochs --resume",
               "--epochs: missing value (got the flag --resume); expected --epochs N");
    expect_msg(parse(&c, "train --dump-weights --epochs=3"), "train --dump-weights --epochs=3",
               "--dump-weights: missing value (got the flag --epochs); expected --dump-weights "
               "FILE");
    expect_msg(parse(&c, "summary --model --help"), "summary --model --help",
               "--model: missing value (got the flag --help); expected --model FILE");
    /* a flag of another command is no path either */
    expect_msg(parse(&c, "eval --checkpoint-dir --resume"), "eval --checkpoint-dir --resume",
               "--checkpoint-dir: missing value (got the flag --resume); expected "
               "--checkpoint-dir DIR");

    /* "" still disables summaries, in both forms, and --flag=value takes any value */
    static const char *const empty[] = {"train", "--summary-dir", "", "--steps-per-epoch", "1"};
    assert_int_equal(parse_argv(&c, 5, empty), MW_OK);
    assert_string_equal(c.train.summary_dir, "");
    assert_int_equal(c.train.steps_per_epoch, 1);
    assert_int_equal(parse(&c, "train --summary-dir= --steps-per-epoch 2"), MW_OK);
    assert_string_equal(c.train.summary_dir, "");
    assert_int_equal(c.train.steps_per_epoch, 2);
    assert_int_equal(parse(&c, "train --summary-dir=--steps-per-epoch"), MW_OK);
    assert_string_equal(c.train.summary_dir, "--steps-per-epoch");
    /* values that only look like flags */
    assert_int_equal(parse(&c, "train --summary-dir --no-such-flag --model -"), MW_OK);
    assert_string_equal(c.train.summary_dir, "--no-such-flag");
    assert_string_equal(c.train.model_path, "-");
    static const char *const spaced[] = {"train", "--summary-dir", "my logs"};
    assert_int_equal(parse_argv(&c, 3, spaced), MW_OK);
    assert_string_equal(c.train.summary_dir, "my logs");
}

/* Output files are written at the end (--dump-weights after training): their directory is
 * checked when the flags are read, with the reason. */
static void output_path_checked_at_parse(void **state)
{
    (void)state;
    mw_cli c;
    const char *dir = mw_test_tmpdir("cli");
    char *file = mw_test_write_file(dir, "file", "x", 1);
    char line[1200], want[2600];

    expect_msg(parse(&c, "train --dump-weights /nonexistent-mwtrain/w.bin"),
               "train --dump-weights /nonexistent-mwtrain/w.bin",
               "--dump-weights '/nonexistent-mwtrain/w.bin': directory '/nonexistent-mwtrain': No "
               "such file or directory; expected a file in an existing, writable directory");
    expect_msg(parse(&c, "export --output /nonexistent-mwtrain/m.safetensors"),
               "export --output /nonexistent-mwtrain/m.safetensors",
               "--output '/nonexistent-mwtrain/m.safetensors': directory '/nonexistent-mwtrain': "
               "No such file or directory; expected a file in an existing, writable directory");
    snprintf(line, sizeof line, "train --dump-weights %s/w.bin", file);
    snprintf(want, sizeof want,
             "--dump-weights '%s/w.bin': directory '%s': Not a directory; "
             "expected a file in an existing, writable directory",
             file, file);
    expect_msg(parse(&c, line), line, want);
    snprintf(line, sizeof line, "export --output %s", dir);
    snprintf(want, sizeof want, "--output '%s': Is a directory; expected a file name", dir);
    expect_msg(parse(&c, line), line, want);
    expect_msg(parse(&c, "train --dump-weights="),
               "train --dump-weights=", "--dump-weights: expected a file, got an empty value");

    /* what exists must be a regular file: a device (--dump-weights /dev/full used to fail only
     * after the whole run), a FIFO, a link to a device; refused when the flags are read */
    expect_msg(parse(&c, "train --dump-weights /dev/full"), "train --dump-weights /dev/full",
               "--dump-weights '/dev/full': is a character device; expected a regular file or a "
               "new name (only a regular file is ever replaced)");
    expect_msg(parse(&c, "export --output /dev/null"), "export --output /dev/null",
               "--output '/dev/null': is a character device; expected a regular file or a new "
               "name (only a regular file is ever replaced)");
    snprintf(line, sizeof line, "%s/fifo", dir);
    assert_int_equal(mkfifo(line, 0644), 0);
    snprintf(line, sizeof line, "export --output %s/fifo", dir);
    snprintf(want, sizeof want,
             "--output '%s/fifo': is a FIFO; expected a regular file or a new name (only a "
             "regular file is ever replaced)",
             dir);
    expect_msg(parse(&c, line), line, want);
    snprintf(line, sizeof line, "train --timeline %s/fifo", dir);
    snprintf(want, sizeof want,
             "--timeline '%s/fifo': is a FIFO; expected a regular file or a new name (only a "
             "regular file is ever replaced)",
             dir);
    expect_msg(parse(&c, line), line, want);
    snprintf(line, sizeof line, "%s/fifo", dir);
    unlink(line);

    /* good: a new file, an existing file, and the current directory */
    snprintf(line, sizeof line, "train --dump-weights %s/w.bin", dir);
    assert_int_equal(parse(&c, line), MW_OK);
    snprintf(line, sizeof line, "export --output %s", file);
    assert_int_equal(parse(&c, line), MW_OK);
    assert_string_equal(c.train.export_path, file);
    assert_int_equal(parse(&c, "train --dump-weights w.bin"), MW_OK);

    /* a directory without write permission (root may write anywhere: not testable there) */
    if (geteuid() != 0) {
        char ro[600];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        assert_int_equal(mkdir(ro, 0500), 0);
        snprintf(line, sizeof line, "train --dump-weights %s/w.bin", ro);
        snprintf(want, sizeof want,
                 "--dump-weights '%s/w.bin': directory '%s': Permission "
                 "denied; expected a file in an existing, writable directory",
                 ro, ro);
        expect_msg(parse(&c, line), line, want);
        rmdir(ro);
    }
    unlink(file);
    free(file);
    rmdir(dir);
}

/* The table's rows: --allreduce's names follow mw_ar_algo, switches take no value, and every
 * help line fits in 100 columns. */
static void table_rows(void **state)
{
    (void)state;
    mw_cli c;
    static const char *const names[] = {"auto", "ring", "hierarchical", "mpi"};
    for (int i = 0; i < 4; i++) {
        char line[64];
        snprintf(line, sizeof line, "train --allreduce %s", names[i]);
        assert_int_equal(parse(&c, line), MW_OK);
        assert_int_equal(c.train.allreduce, i);
        assert_string_equal(mw_ar_algo_name(c.train.allreduce), names[i]);
    }
    assert_int_equal(parse(&c, "train --optimizer sgd --progress none --backend ref --device cpu"),
                     MW_OK);
    assert_true(c.train.optimizer == MW_OPT_SGD && c.train.progress == MW_PROGRESS_NONE);
    assert_string_equal(c.train.backend, "ref");
    assert_string_equal(c.train.device, "cpu");
    assert_int_equal(parse(&c, "train --verbose"), MW_OK);
    assert_int_equal(c.log_level, 3); /* MW_LOG_DEBUG */
    expect_msg(parse(&c, "train --resume=1"), "train --resume=1",
               "--resume '1': expected no value (--resume is a switch)");
    expect_msg(parse(&c, "train --foo=3"), "train --foo=3",
               "unknown flag '--foo' (see `mwtrain train --help`)");
    expect_msg(parse(&c, "train --epoch=3"), "train --epoch=3",
               "unknown flag '--epoch' (did you mean '--epochs'? see `mwtrain train --help`)");

    static const mw_cmd cmds[] = {MW_CMD_TRAIN,   MW_CMD_EVAL,    MW_CMD_EXPORT,
                                  MW_CMD_CLUSTER, MW_CMD_SUMMARY, MW_CMD_TFCONFIG};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        mw_cli_help(f, cmds[i]);
        fclose(f);
        int lineno = 1;
        for (const char *l = buf; *l; lineno++) {
            size_t n = strcspn(l, "\n");
            if (n > 100)
                fail_msg("help of command %d, line %d: %zu columns: %.*s", (int)cmds[i], lineno, n,
                         (int)n, l);
            l += n + (l[n] == '\n');
        }
        free(buf);
    }
}

static void bad_command_lines(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mw_cli c;
        mw_status s = parse(&c, bad[i].line);
        if (s != MW_EINVAL || !strstr(mw_err_msg(), bad[i].expect))
            fail_msg("`mwtrain %s`: got status %s and message \"%s\"; expected MW_EINVAL and "
                     "\"%s\"",
                     bad[i].line, mw_status_str(s), mw_err_msg(), bad[i].expect);
    }
    mw_err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(all_flags),
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(help_lists_every_flag),
        cmocka_unit_test(bad_command_lines),
        cmocka_unit_test(table_rows),
        cmocka_unit_test(numbers_are_plain_decimal),
        cmocka_unit_test(flag_name_is_no_value),
        cmocka_unit_test(output_path_checked_at_parse),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
