/* Tests for worker/checkpoint_dir.c, the checkpoint directory: numbering, max_to_keep, the
 * index (and its entries that reach outside), atomic replacement, the fallback from a corrupt
 * latest checkpoint, write failures that must leave earlier checkpoints intact, and the survey
 * of leftovers. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/status.h"
#include "tests/ckpt_util.h"
#include "tests/util.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_dir.h"

/* ---- the directory ---- */

static void test_save_keep(void **state)
{
    const char *dir = *state;
    char *sub = mw_test_ckpt_join(dir, "a/b/training_checkpoints"); /* created with its parents */
    mw_ckpt c;
    mw_test_ckpt_make_state(&c, 50, "adam", 2, 3);
    for (int i = 1; i <= 7; i++) {
        c.global_step = i;
        c.step_in_epoch = 0;
        int n = -1;
        assert_int_equal(mw_ckpt_save(sub, &c, 3, &n), MW_OK);
        assert_int_equal(n, i);
    }
    assert_string_equal(mw_test_ckpt_listing(sub), "checkpoint ckpt-5 ckpt-6 ckpt-7");
    char *ip = mw_test_ckpt_join(sub, "checkpoint");
    size_t n;
    char *text = mw_test_ckpt_read_all(ip, &n);
    const char *want = "model_checkpoint_path: \"ckpt-7\"\n"
                       "all_model_checkpoint_paths: \"ckpt-5\"\n"
                       "all_model_checkpoint_paths: \"ckpt-6\"\n"
                       "all_model_checkpoint_paths: \"ckpt-7\"\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(text, want, n);

    mw_ckpt r;
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(sub, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-7");
    assert_int_equal(r.global_step, 7);
    mw_test_ckpt_assert_same(&c, &r);

    /* keep <= 0 keeps everything */
    int num;
    assert_int_equal(mw_ckpt_save(sub, &c, 0, &num), MW_OK);
    assert_int_equal(mw_ckpt_save(sub, &c, -1, &num), MW_OK);
    assert_int_equal(num, 9);
    assert_string_equal(mw_test_ckpt_listing(sub), "checkpoint ckpt-5 ckpt-6 ckpt-7 ckpt-8 ckpt-9");
    free(text);
    free(ip);
    free(used);
    free(sub);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Numbering continues above both the index and the files (an index can lag behind). */
static void test_save_numbering(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    mw_test_ckpt_make_state(&c, 8, "sgd", 1, 4);
    char *p = mw_test_ckpt_join(dir, "ckpt-41");
    assert_int_equal(mw_ckpt_write(&c, p), MW_OK);
    free(p);
    int n;
    assert_int_equal(mw_ckpt_save(dir, &c, 5, &n), MW_OK);
    assert_int_equal(n, 42);
    const char *idx = "model_checkpoint_path: \"ckpt-50\"\n"
                      "all_model_checkpoint_paths: \"ckpt-50\"\n"
                      "all_model_checkpoint_timestamps: 1700000000.5\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    assert_int_equal(mw_ckpt_save(dir, &c, 5, &n), MW_OK);
    assert_int_equal(n, 51);
    mw_ckpt_free(&c);
}

static void test_load_empty_and_missing(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    mw_ckpt_init(&c);
    char *used = (char *)"unchanged";
    assert_int_equal(mw_ckpt_load_latest(dir, &c, &used), MW_ECKPT);
    assert_null(used);
    char want[600];
    snprintf(want, sizeof want, "no checkpoint in %s", dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();

    char *missing = mw_test_ckpt_join(dir, "nope");
    assert_int_equal(mw_ckpt_load_latest(missing, &c, NULL), MW_ECKPT);
    snprintf(want, sizeof want, "no checkpoint in %s (the directory does not exist)", missing);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(missing);
}

static void flip_byte(const char *dir, const char *name, long at)
{
    char *p = mw_test_ckpt_join(dir, name);
    size_t n;
    uint8_t *b = mw_test_ckpt_read_all(p, &n);
    size_t i = at >= 0 ? (size_t)at : n + (size_t)at;
    assert_true(i < n);
    b[i] ^= 0x40;
    free(mw_test_write_file(dir, name, b, n));
    free(b);
    free(p);
}

static void truncate_to(const char *dir, const char *name, size_t nbytes)
{
    char *p = mw_test_ckpt_join(dir, name);
    assert_int_equal(truncate(p, (off_t)nbytes), 0);
    free(p);
}

static void test_load_falls_back(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    mw_test_ckpt_make_state(&c, 300, "adam", 2, 5);
    c.step_in_epoch = 0;
    for (int i = 1; i <= 3; i++) {
        c.global_step = 10 * i;
        assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    }
    flip_byte(dir, "ckpt-3", -10); /* inside the last section's payload */
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-2");
    assert_int_equal(r.global_step, 20);
    free(used);

    truncate_to(dir, "ckpt-2", 30);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    assert_int_equal(r.global_step, 10);
    free(used);

    /* without the index the files themselves are found, highest first */
    char *ip = mw_test_ckpt_join(dir, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    free(ip);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);

    /* all bad: one error listing each one tried, newest first, with its reason */
    flip_byte(dir, "ckpt-1", 0);
    mw_ckpt_free(&r);
    mw_test_ckpt_make_state(&r, 3, "sgd", 0, 9); /* a failed load leaves the caller's state alone */
    mw_status rc = mw_ckpt_load_latest(dir, &r, &used);
    char want[800];
    snprintf(want, sizeof want,
             "no valid checkpoint in %s (tried: ckpt-3 (bad compressed data in section slot2 (",
             dir);
    expect_err(rc, MW_ECKPT, want,
               "), ckpt-2 (truncated: section 1 of 5 starts at byte 16 but the file ends at "
               "30 (expected a 28-byte section header)), ckpt-1 (",
               "), ckpt-1 (not a checkpoint: bad magic");
    assert_null(used);
    assert_int_equal(r.nparams, 3);
    mw_err_clear();
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* An index naming a file that is gone, or an unparsable index, does not stop the search. */
static void test_load_bad_index(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    mw_test_ckpt_make_state(&c, 20, "sgd", 1, 6);
    assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-9\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    const char *junk = "model_checkpoint_path ckpt-1\n";
    free(mw_test_write_file(dir, "checkpoint", junk, strlen(junk)));
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Snapshot of a directory's files (names and contents) to prove a failed save changed nothing. */
static char *snapshot(const char *dir)
{
    char *out = strdup(mw_test_ckpt_listing(dir));
    char names[1024];
    snprintf(names, sizeof names, "%s", out);
    for (char *tok = strtok(names, " "); tok; tok = strtok(NULL, " ")) {
        char *p = mw_test_ckpt_join(dir, tok);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        if (S_ISREG(st.st_mode)) {
            size_t n;
            uint8_t *b = mw_test_ckpt_read_all(p, &n);
            char line[64];
            snprintf(line, sizeof line, " %s:%zu:%08lx", tok, n, crc32(0L, b, (uInt)n));
            out = realloc(out, strlen(out) + strlen(line) + 1);
            strcat(out, line);
            free(b);
        }
        free(p);
    }
    return out;
}

static void test_save_unwritable(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    mw_test_ckpt_make_state(&c, 2000, "adam", 2, 8);

    /* a directory that cannot exist: under a regular file (chmod would not stop root) */
    free(mw_test_write_file(dir, "file", "x", 1));
    char *bad_dir = mw_test_ckpt_join(dir, "file/ckpts");
    assert_int_equal(mw_ckpt_save(bad_dir, &c, 5, NULL), MW_EIO);
    char want[600];
    snprintf(want, sizeof want, "checkpoint directory %s: cannot create it (Not a directory)",
             bad_dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(bad_dir);

    char *ck = mw_test_ckpt_join(dir, "ck");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    char *before = snapshot(ck);

    /* the checkpoint's temporary file cannot be created */
    char tmp[64];
    snprintf(tmp, sizeof tmp, "ckpt-3.tmp-%ld", (long)getpid());
    char *blocker = mw_test_ckpt_join(ck, tmp);
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_equal(mw_ckpt_save(ck, &c, 1, NULL), MW_EIO);
    snprintf(want, sizeof want, "checkpoint directory %s: cannot create ckpt-3 (File exists)", ck);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_int_equal(rmdir(blocker), 0);
    free(blocker);
    char *after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);

    /* a full disk, simulated with a file-size limit: the write fails part-way */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    mw_status rc = mw_ckpt_save(ck, &c, 1, NULL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, MW_EIO);
    snprintf(want, sizeof want, "checkpoint directory %s: cannot write ckpt-3 (File too large)",
             ck);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);

    /* the index cannot be replaced: the old index stays, nothing is deleted, and the new
     * checkpoint, although complete, is not listed */
    snprintf(tmp, sizeof tmp, "checkpoint.tmp-%ld", (long)getpid());
    blocker = mw_test_ckpt_join(ck, tmp);
    assert_int_equal(mkdir(blocker, 0755), 0);
    expect_err(mw_ckpt_save(ck, &c, 1, NULL), MW_EIO,
               "cannot create the index 'checkpoint' (File exists); ckpt-3 was written");
    mw_err_clear();
    assert_int_equal(rmdir(blocker), 0);
    free(blocker);
    assert_true(mw_test_ckpt_exists(ck, "ckpt-3"));
    char *p3 = mw_test_ckpt_join(ck, "ckpt-3");
    assert_int_equal(unlink(p3), 0); /* set aside, so the rest must equal the snapshot */
    after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(mw_ckpt_save(ck, &c, 1, NULL), MW_OK); /* and a later save works */
    assert_string_equal(mw_test_ckpt_listing(ck), "checkpoint ckpt-3");
    assert_int_equal(unlink(p3), 0);
    free(p3);

    /* loading follows the index first, so a checkpoint left unlisted by such a failure is only
     * a fallback */
    char *ip = mw_test_ckpt_join(ck, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    free(ip);
    const char *idx = "model_checkpoint_path: \"ckpt-1\"\n";
    free(mw_test_write_file(ck, "checkpoint", idx, strlen(idx)));
    for (int i = 1; i <= 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ckpt-%d", i);
        char *pi = mw_test_ckpt_join(ck, name);
        c.global_step = i;
        c.step_in_epoch = 0;
        assert_int_equal(mw_ckpt_write(&c, pi), MW_OK);
        free(pi);
    }
    mw_ckpt r;
    mw_ckpt_init(&r);
    char *used;
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1"); /* the index decides, even with ckpt-2 there */
    assert_int_equal(r.global_step, 1);
    free(used);

    free(before);
    free(ck);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Index entries name files inside the directory; others are never opened, and do not count
 * for the next number either. */
static void test_index_outside(void **state)
{
    const char *dir = *state;
    mw_ckpt c, other, r;
    mw_test_ckpt_make_state(&c, 25, "sgd", 1, 14);
    mw_test_ckpt_make_state(&other, 25, "sgd", 1, 15);
    c.step_in_epoch = other.step_in_epoch = 0;
    c.global_step = 1;
    other.global_step = 7;
    char *ck = mw_test_ckpt_join(dir, "ck"), *elsewhere = mw_test_ckpt_join(dir, "elsewhere");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    assert_int_equal(mw_ckpt_save(elsewhere, &other, 5, NULL), MW_OK); /* its ckpt-1 */
    char idx[1200];
    snprintf(idx, sizeof idx,
             "model_checkpoint_path: \"../elsewhere/ckpt-1\"\n"
             "all_model_checkpoint_paths: \"%s/ckpt-1\"\n"
             "all_model_checkpoint_paths: \"sub/ckpt-8\"\n"
             "all_model_checkpoint_paths: \"..\"\n"
             "all_model_checkpoint_paths: \"ckpt-1\"\n"
             "all_model_checkpoint_paths: \"../elsewhere/ckpt-1\"\n",
             elsewhere);
    free(mw_test_write_file(ck, "checkpoint", idx, strlen(idx)));
    char *used = NULL;
    mw_ckpt_init(&r);
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "ck/ckpt-1");
    assert_int_equal(r.global_step, 1); /* not the other run's 7 */
    free(used);

    mw_ckpt_survey sv;
    assert_int_equal(mw_ckpt_survey_dir(ck, &sv), MW_OK);
    assert_int_equal(sv.complete, 1);
    expect_contains(sv.debris, "checkpoint (index entry ../elsewhere/ckpt-1: outside the "
                               "directory)");
    expect_contains(sv.debris, "checkpoint (index entry sub/ckpt-8: outside");
    expect_contains(sv.debris, "checkpoint (index entry ..: outside");

    /* only the index's entries named outside: nothing to try */
    char *one = mw_test_ckpt_join(ck, "ckpt-1");
    assert_int_equal(unlink(one), 0);
    assert_int_equal(mw_ckpt_survey_dir(ck, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    expect_err(mw_ckpt_load_latest(ck, &r, &used), MW_ECKPT, "no valid checkpoint in ", "ckpt-1");
    mw_err_clear();
    int num = 0;
    assert_int_equal(mw_ckpt_save(ck, &c, 5, &num), MW_OK);
    assert_int_equal(num, 2); /* 1 + the highest of the directory's own */
    free(one);
    free(ck);
    free(elsewhere);
    mw_ckpt_free(&c);
    mw_ckpt_free(&other);
    mw_ckpt_free(&r);
}

/* What a directory holds besides checkpoints: the leftovers of crashed saves are named, never
 * counted, and the temporary files among them can be removed. */
static void test_survey_and_temps(void **state)
{
    const char *dir = *state;
    mw_ckpt_survey sv;
    char *missing = mw_test_ckpt_join(dir, "missing");
    assert_int_equal(mw_ckpt_survey_dir(missing, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    assert_string_equal(sv.debris, "");
    free(missing);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_string_equal(sv.debris, "");

    free(mw_test_write_file(dir, "ckpt-1.tmp-1", "partial", 7));
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    assert_string_equal(sv.debris, "ckpt-1.tmp-1 (temporary file)");

    free(mw_test_write_file(dir, "ckpt-2", "", 0));
    free(mw_test_write_file(dir, "checkpoint.tmp-77", "x", 1));
    free(mw_test_write_file(dir, "notes.tmp-1", "mine", 4)); /* not a name mwtrain writes */
    free(mw_test_write_file(dir, "ckpt-1.tmp-x", "mine", 4));
    char *fifo = mw_test_ckpt_join(dir, "ckpt-3"), *sub = mw_test_ckpt_join(dir, "ckpt-4"),
         *tmpdir = mw_test_ckpt_join(dir, "ckpt-5.tmp-9");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mkdir(tmpdir, 0755), 0);
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-2\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    static const char *const parts[] = {
        "ckpt-1.tmp-1 (temporary file)", "checkpoint.tmp-77 (temporary file)",
        "ckpt-2 (an empty file)",        "ckpt-3 (a FIFO)",
        "ckpt-4 (a directory)",          "checkpoint (index entry ckpt-9: missing)"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(sv.debris, parts[i]))
            fail_msg("survey: '%s' lacks '%s'", sv.debris, parts[i]);
    assert_null(strstr(sv.debris, "notes"));
    assert_null(strstr(sv.debris, "tmp-x"));
    assert_null(strstr(sv.debris, "ckpt-2 (index")); /* described once, as a file */

    /* only regular temporary files of mwtrain's own names go */
    char removed[128];
    assert_int_equal(mw_ckpt_remove_temps(dir, removed, sizeof removed), 2);
    assert_true(strstr(removed, "ckpt-1.tmp-1") && strstr(removed, "checkpoint.tmp-77"));
    assert_string_equal(mw_test_ckpt_listing(dir),
                        "checkpoint ckpt-1.tmp-x ckpt-2 ckpt-3 ckpt-4 ckpt-5.tmp-9 "
                        "notes.tmp-1");
    assert_int_equal(mw_ckpt_remove_temps(dir, removed, sizeof removed), 0);
    assert_string_equal(removed, "");

    /* a real checkpoint, or a link named like one, counts */
    mw_ckpt c;
    mw_test_ckpt_make_state(&c, 5, "sgd", 0, 16);
    char *six = mw_test_ckpt_join(dir, "ckpt-6");
    assert_int_equal(mw_ckpt_write(&c, six), MW_OK);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 1);
    char *seven = mw_test_ckpt_join(dir, "ckpt-7");
    assert_int_equal(symlink("ckpt-6", seven), 0);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 2);
    free(seven);
    free(six);
    free(fifo);
    free(sub);
    free(tmpdir);
    mw_ckpt_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_save_keep),
        mw_test_in_tmpdir(test_save_numbering),
        mw_test_in_tmpdir(test_load_empty_and_missing),
        mw_test_in_tmpdir(test_load_falls_back),
        mw_test_in_tmpdir(test_load_bad_index),
        mw_test_in_tmpdir(test_save_unwritable),
        mw_test_in_tmpdir(test_index_outside),
        mw_test_in_tmpdir(test_survey_and_temps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
