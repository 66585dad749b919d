/* Every reader of a file the user names refuses what is not a regular file, without opening it
 * (a FIFO given as an input would otherwise hang the whole job forever): the .npz, .npy, IDX and
 * CIFAR readers (--data), the Keras JSON and .keras readers (--model), --optimizer-config,
 * --loss-config,
 * --tf-config and `tf-config --hostfile`.
 *
 * Each reader gets, where its file is expected, a FIFO without a writer (an open without
 * O_NONBLOCK would block forever: the test runs under an alarm), a link to /dev/zero (a read
 * would never end) and a directory. Each must fail with MW_EIO (exit 4) and the one message
 * "PATH: is a FIFO, not a regular file; expected ..." naming the file, and an inotify watch on
 * the FIFO and on /dev/zero must see no open, read or write. The shared check is
 * mw_fs_open_input (common/fs.h); the other regular-file cases are each reader's own tests. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/hostfile.h"
#include "cluster/tfconfig.h"
#include "tests/util.h"
#include "worker/data/data.h"
#include "worker/data/data_open.h"
#include "worker/keras/compile.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/optimizer.h"
#include "worker/model/model.h"
#include "worker/opts.h"

typedef enum { AS_FIFO, AS_DEVICE, AS_DIR } special;
static const char *const special_kind[] = {"a FIFO", "a character device", "a directory"};

/* path becomes the special file s (its parent exists). */
static void make_special(const char *path, special s)
{
    switch (s) {
    case AS_FIFO:
        assert_int_equal(mkfifo(path, 0644), 0);
        break;
    case AS_DEVICE:
        assert_int_equal(symlink("/dev/zero", path), 0);
        break;
    case AS_DIR:
        assert_int_equal(mkdir(path, 0755), 0);
        break;
    }
}

/* A reader run on `arg` (a file, or the directory that holds `file`). */
typedef mw_status (*reader_fn)(const char *arg);

static mw_status read_data(const char *arg)
{
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    const mw_data_opts o = {.cifar_fine = 1};
    mw_status rc = mw_dataset_open(&tr, &te, arg, &o);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    return rc;
}

static mw_status read_model(const char *arg)
{
    mw_model m;
    mw_keras_weights w;
    mw_keras_weights_init(&w);
    mw_status rc = mw_keras_model_load(&m, arg, 0, 0, 0, 0, &w);
    mw_keras_weights_free(&w);
    mw_model_free(&m);
    return rc;
}

/* `train --model X.keras` asks the archive for its optimizer while the flags are parsed, then
 * loads it: neither may open it. */
static mw_status read_archive_optimizer(const char *arg)
{
    json_t *j = NULL;
    if (mw_keras_archive_is(arg))
        return mw_err(MW_EINTERNAL, "%s: taken for an archive: it was opened", arg);
    mw_status rc = mw_keras_archive_compiled(arg, "optimizer", &j);
    if (rc != MW_OK || j) {
        json_decref(j);
        return mw_err(MW_EINTERNAL, "%s: an optimizer was read", arg);
    }
    return read_model(arg);
}

static mw_status read_optimizer(const char *arg)
{
    mw_train_opts o;
    mw_train_opts_default(&o);
    return mw_optimizer_load(&o, arg);
}

static mw_status read_loss(const char *arg)
{
    mw_train_opts o;
    mw_train_opts_default(&o);
    o.loss_config = arg;
    return mw_loss_resolve(&o);
}

static mw_status read_tfconfig(const char *arg)
{
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    int found = 0;
    mw_status rc = mw_tfconfig_load(&c, arg, &found);
    mw_tfconfig_free(&c);
    return rc;
}

static mw_status read_hostfile(const char *arg)
{
    char **configs = NULL;
    int n = 0;
    mw_status rc = mw_hostfile_tf_configs(arg, 2222, &configs, &n, NULL);
    if (rc == MW_OK)
        mw_hostfile_configs_free(configs, n);
    return rc;
}

static const char *const idx_rest[] = {"train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                       "t10k-labels-idx1-ubyte", NULL};

static const struct {
    const char *what;
    const char *file; /* the special file's name */
    int in_dir;       /* 1: the reader is given the directory that holds it */
    reader_fn fn;
    const char *expected;          /* the message's "; expected ..." */
    const char *const *companions; /* regular files beside it, or NULL */
} readers[] = {
    {"--data .npz", "data.npz", 0, read_data, "expected a .npz archive or a directory", NULL},
    {"--data .npy", "x_train.npy", 1, read_data, "expected a .npy file", NULL},
    {"--data IDX", "train-images-idx3-ubyte", 1, read_data, "expected an IDX file", idx_rest},
    {"--data CIFAR", "data_batch_1.bin", 1, read_data, "expected a CIFAR binary batch", NULL},
    {"--model JSON", "model.json", 0, read_model, "expected a Keras model", NULL},
    {"--model .keras", "model.keras", 0, read_model, "expected a .keras archive", NULL},
    {"--model archive optimizer", "m.json", 0, read_archive_optimizer, "expected a Keras model",
     NULL},
    {"--optimizer-config", "opt.json", 0, read_optimizer,
     "expected the JSON of keras.optimizers.serialize", NULL},
    {"--loss-config", "loss.json", 0, read_loss, "expected the JSON of keras.losses.serialize",
     NULL},
    {"--tf-config", "tf.json", 0, read_tfconfig, "expected a readable TF_CONFIG JSON file", NULL},
    {"tf-config --hostfile", "hosts", 0, read_hostfile, "expected a readable Open MPI hostfile",
     NULL},
};

static void every_reader_refuses_special_files(void **state)
{
    const char *root = *state;
    alarm(10); /* a reader that opens the FIFO blocks: end the test with SIGALRM */
    int failed = 0, n = 0;
    for (size_t r = 0; r < sizeof readers / sizeof *readers; r++)
        for (special s = AS_FIFO; s <= AS_DIR; s++) {
            if (s == AS_DIR && !readers[r].in_dir && readers[r].fn == read_data)
                continue; /* a directory is what --data takes */
            char dir[700], path[800], arg[800], who[200];
            snprintf(dir, sizeof dir, "%s/%zu-%d", root, r, (int)s);
            assert_int_equal(mkdir(dir, 0755), 0);
            snprintf(path, sizeof path, "%s/%s", dir, readers[r].file);
            make_special(path, s);
            for (const char *const *c = readers[r].companions; c && *c; c++)
                free(mw_test_write_file(dir, *c, "", 0)); /* the other files of the set */
            snprintf(arg, sizeof arg, "%s", readers[r].in_dir ? dir : path);
            const char *watched = s == AS_DEVICE ? "/dev/zero" : path;
            int w = s == AS_DIR ? -1 : mw_test_watch(watched);
            snprintf(who, sizeof who, "%s as %s", readers[r].what, special_kind[s]);
            mw_err_clear();
            const mw_status rc = readers[r].fn(arg);
            const char *const subs[] = {path, special_kind[s], "not a regular file",
                                        readers[r].expected, NULL};
            int ok = mw_test_err_matches(who, rc, MW_EIO, subs);
            const unsigned ev = w >= 0 ? mw_test_watch_events(w) : 0;
            if (ev & (IN_OPEN | IN_ACCESS | IN_MODIFY)) {
                fprintf(stderr, "%s: %s was opened (inotify events 0x%x)\n", who, watched, ev);
                ok = 0;
            }
            failed += !ok;
            n++;
        }
    alarm(0);
    mw_err_clear();
    printf("%d reader cases, %d failed\n", n, failed);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(every_reader_refuses_special_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
