/* common/fs: mkdir -p (nested, existing, a component or the target that is a file, empty and
 * too long paths), the bounded join, and the atomic write (content, no temporary file left
 * behind, the messages when it cannot happen). Unwritable directories are made with a regular
 * file in the path, since permissions do not stop root.
 *
 * Inputs: mw_fs_open_input and mw_fs_read_input take a regular file (also through a symbolic
 * link) and refuse a FIFO, a socket, a character device, a directory and a link to a FIFO with
 * MW_EIO and the kind named, without opening them (an inotify watch sees no open: a FIFO
 * without a writer would otherwise block, so the test also runs under an alarm); an oversized
 * file is refused from its size alone (a sparse 1 GiB file, nothing read). Outputs:
 * mw_fs_output_kind accepts a missing path and a regular file and names everything else. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/status.h"
#include "tests/util.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The names in dir other than . and .., space-separated in sorted order (static buffer). */
static const char *listing(const char *dir)
{
    static char out[1024];
    char names[16][256];
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) && n < 16)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[256];
            memcpy(t, names[j], sizeof t);
            memcpy(names[j], names[j - 1], sizeof t);
            memcpy(names[j - 1], t, sizeof t);
        }
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
    return out;
}

static void mkdir_p_nested_and_existing(void **state)
{
    (void)state;
    char root[512], dir[700];
    snprintf(root, sizeof root, "%s", mw_test_tmpdir("fs-mkdir"));
    snprintf(dir, sizeof dir, "%s/a/b/c", root);
    mw_err_clear();
    assert_int_equal(mw_fs_mkdir_p(dir, "test dir"), MW_OK);
    assert_true(is_dir(dir));
    assert_int_equal(mw_fs_mkdir_p(dir, "test dir"), MW_OK); /* already there */
    snprintf(dir, sizeof dir, "%s/a//b/d/", root);           /* doubled and trailing '/' */
    assert_int_equal(mw_fs_mkdir_p(dir, "test dir"), MW_OK);
    snprintf(dir, sizeof dir, "%s/a/b/d", root);
    assert_true(is_dir(dir));
    assert_int_equal(mw_fs_mkdir_p("/", "test dir"), MW_OK);
    assert_int_equal(mw_fs_mkdir_p_errno(root, NULL, 0), 0);
    assert_string_equal(mw_err_msg(), "");
}

static void mkdir_p_errors(void **state)
{
    (void)state;
    char root[512], blocker[600], dir[800], want[2000];
    snprintf(root, sizeof root, "%s", mw_test_tmpdir("fs-mkdir-err"));
    free(mw_test_write_file(root, "file", "x", 1));
    snprintf(blocker, sizeof blocker, "%s/file", root);

    /* a component is a regular file: the first component that cannot be made is named */
    snprintf(dir, sizeof dir, "%s/sub/logs", blocker);
    mw_err_clear();
    assert_int_equal(mw_fs_mkdir_p(dir, "--checkpoint-dir"), MW_EIO);
    snprintf(want, sizeof want, "--checkpoint-dir %s: cannot create %s/sub: %s", dir, blocker,
             strerror(ENOTDIR));
    assert_string_equal(mw_err_msg(), want);
    char failed[800];
    assert_int_equal(mw_fs_mkdir_p_errno(dir, failed, sizeof failed), ENOTDIR);
    snprintf(want, sizeof want, "%s/sub", blocker);
    assert_string_equal(failed, want);
    assert_int_equal(mw_fs_mkdir_p_errno(dir, NULL, 0), ENOTDIR);

    /* the target itself is a regular file */
    mw_err_clear();
    assert_int_equal(mw_fs_mkdir_p(blocker, "summary dir"), MW_EIO);
    snprintf(want, sizeof want, "summary dir %s: %s", blocker, strerror(ENOTDIR));
    assert_string_equal(mw_err_msg(), want);
    assert_int_equal(mw_fs_mkdir_p_errno(blocker, failed, sizeof failed), ENOTDIR);
    assert_string_equal(failed, "");

    /* empty */
    mw_err_clear();
    assert_int_equal(mw_fs_mkdir_p("", "summary dir"), MW_EINVAL);
    assert_string_equal(mw_err_msg(), "summary dir: empty path");
    assert_int_equal(mw_fs_mkdir_p_errno("", failed, sizeof failed), ENOENT);

    /* longer than PATH_MAX: the reason comes before the path */
    size_t n = PATH_MAX + 10;
    char *longdir = malloc(n + 1);
    assert_non_null(longdir);
    memset(longdir, 'd', n);
    longdir[0] = '/';
    longdir[n] = '\0';
    mw_err_clear();
    assert_int_equal(mw_fs_mkdir_p(longdir, "test dir"), MW_EIO);
    snprintf(want, sizeof want, "test dir: path too long (%zu bytes, at most %d): /ddd", n,
             PATH_MAX - 1);
    assert_memory_equal(mw_err_msg(), want, strlen(want));
    assert_int_equal(mw_fs_mkdir_p_errno(longdir, failed, sizeof failed), ENAMETOOLONG);
    free(longdir);
    mw_err_clear();
}

static void join(void **state)
{
    (void)state;
    char out[16];
    mw_err_clear();
    assert_int_equal(mw_fs_join(out, sizeof out, "dir", "name"), MW_OK);
    assert_string_equal(out, "dir/name");
    assert_int_equal(mw_fs_join(out, sizeof out, "0123456", "1234567"), MW_OK); /* 15 + NUL */
    assert_string_equal(out, "0123456/1234567");
    assert_string_equal(mw_err_msg(), "");

    assert_int_equal(mw_fs_join(out, sizeof out, "0123456", "12345678"), MW_EIO);
    assert_string_equal(out, "");
    assert_string_equal(mw_err_msg(), "path too long (16 bytes, at most 15): 0123456/12345678");
    mw_err_clear();
}

static void write_atomic(void **state)
{
    (void)state;
    char dir[512], want[2000];
    snprintf(dir, sizeof dir, "%s", mw_test_tmpdir("fs-write"));
    static const char a[] = "first content", b[] = "second";
    mw_err_clear();
    assert_int_equal(mw_fs_write_atomic(dir, "out.bin", a, sizeof a - 1, "test dir"), MW_OK);
    char path[700];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    size_t nbytes = 0;
    char *got = mw_test_read_file(path, &nbytes);
    assert_non_null(got);
    assert_int_equal(nbytes, sizeof a - 1);
    assert_memory_equal(got, a, nbytes);
    free(got);
    assert_string_equal(listing(dir), "out.bin"); /* no temporary file left */

    /* replacing an existing file, and an empty one */
    assert_int_equal(mw_fs_write_atomic(dir, "out.bin", b, sizeof b - 1, "test dir"), MW_OK);
    got = mw_test_read_file(path, &nbytes);
    assert_int_equal(nbytes, sizeof b - 1);
    assert_memory_equal(got, b, nbytes);
    free(got);
    assert_int_equal(mw_fs_write_atomic(dir, "empty", "", 0, "test dir"), MW_OK);
    snprintf(path, sizeof path, "%s/empty", dir);
    got = mw_test_read_file(path, &nbytes);
    assert_int_equal(nbytes, 0);
    free(got);
    assert_string_equal(listing(dir), "empty out.bin");
    assert_string_equal(mw_err_msg(), "");

    /* the directory does not exist: the temporary file cannot be created */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    assert_int_equal(mw_fs_write_atomic(missing, "out.bin", a, sizeof a - 1, "test dir"), MW_EIO);
    snprintf(want, sizeof want, "test dir %s: cannot create out.bin (%s)", missing,
             strerror(ENOENT));
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();

    /* the target is a directory: the rename fails and the temporary file is removed */
    snprintf(path, sizeof path, "%s/taken", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mw_fs_write_atomic(dir, "taken", a, sizeof a - 1, "test dir"), MW_EIO);
    snprintf(want, sizeof want, "test dir %s: cannot rename taken (%s)", dir, strerror(EISDIR));
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_true(is_dir(path));
    assert_string_equal(listing(dir), "empty out.bin taken");
    const char *step = NULL;
    assert_int_equal(mw_fs_write_atomic_errno(path, a, sizeof a - 1, &step), EISDIR);
    assert_string_equal(step, "rename");
    assert_string_equal(listing(dir), "empty out.bin taken");
    assert_string_equal(mw_err_msg(), ""); /* the errno form records nothing */

    assert_int_equal(mw_fs_fsync_dir(dir), 0);
    assert_int_equal(mw_fs_fsync_dir(missing), ENOENT);
}

/* dir/name as a FIFO, a listening Unix socket, a directory and links to a file and a FIFO. */
static void make_specials(const char *dir, int *sock)
{
    char p[700];
    snprintf(p, sizeof p, "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0644), 0);
    snprintf(p, sizeof p, "%s/sock", dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    assert_true(strlen(p) < sizeof a.sun_path);
    strcpy(a.sun_path, p);
    *sock = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(*sock >= 0);
    assert_int_equal(bind(*sock, (const struct sockaddr *)&a, sizeof a), 0);
    snprintf(p, sizeof p, "%s/subdir", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    free(mw_test_write_file(dir, "plain", "12345", 5));
    snprintf(p, sizeof p, "%s/link-plain", dir);
    assert_int_equal(symlink("plain", p), 0);
    snprintf(p, sizeof p, "%s/link-fifo", dir);
    assert_int_equal(symlink("fifo", p), 0);
    snprintf(p, sizeof p, "%s/dangling", dir);
    assert_int_equal(symlink("nowhere", p), 0);
}

static void open_input_regular_only(void **state)
{
    const char *dir = *state;
    int sock = -1;
    make_specials(dir, &sock);
    alarm(20); /* a blocking open of the FIFO would hang: end the test instead */
    char p[700], want[900];
    int fd = -1;
    size_t n = 0;
    static const struct {
        const char *name, *kind;
    } refused[] = {
        {"fifo", "a FIFO"},        {"link-fifo", "a FIFO"},      {"sock", "a socket"},
        {"subdir", "a directory"}, {NULL, "a character device"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        if (refused[i].name)
            snprintf(p, sizeof p, "%s/%s", dir, refused[i].name);
        else
            snprintf(p, sizeof p, "/dev/zero"); /* an endless read, were it opened */
        int w = mw_test_watch(p);
        mw_err_clear();
        expect_err(mw_fs_open_input(p, "a test input", &fd, &n), MW_EIO, "");
        snprintf(want, sizeof want, "%s: is %s, not a regular file; expected a test input", p,
                 refused[i].kind);
        assert_string_equal(mw_err_msg(), want);
        assert_int_equal(fd, -1);
        mw_err_clear();
        char *text = NULL;
        expect_err(mw_fs_read_input(p, NULL, 1 << 20, MW_ECONFIG, &text, &n), MW_EIO,
                   "not a regular file");
        assert_null(text);
        mw_err_clear();
        FILE *f = NULL;
        expect_err(mw_fs_fopen_input(p, NULL, &f, &n), MW_EIO, "not a regular file");
        assert_null(f);
        mw_err_clear();
        const unsigned ev = mw_test_watch_events(w);
        if (ev & (IN_OPEN | IN_ACCESS | IN_MODIFY))
            fail_msg("%s was opened (inotify events 0x%x)", p, ev);
    }
    /* missing, and a dangling link */
    snprintf(p, sizeof p, "%s/dangling", dir);
    expect_err(mw_fs_open_input(p, "a test input", &fd, &n), MW_EIO,
               ": cannot open: No such file or directory; expected a test input");
    mw_err_clear();

    /* a regular file, directly and through a link: blocking reads again, its size */
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, k ? "link-plain" : "plain");
        assert_int_equal(mw_fs_open_input(p, NULL, &fd, &n), MW_OK);
        assert_int_equal(n, 5);
        assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        char *text = NULL;
        assert_int_equal(mw_fs_read_input(p, NULL, 5, MW_ECONFIG, &text, &n), MW_OK);
        assert_int_equal(n, 5);
        assert_string_equal(text, "12345");
        free(text);
        /* one byte over the limit */
        expect_err(mw_fs_read_input(p, NULL, 4, MW_ECONFIG, &text, &n), MW_ECONFIG,
                   ": 5 bytes; expected at most 4 (4 bytes)");
        assert_null(text);
        mw_err_clear();
    }
    alarm(0);
    close(sock);
}

/* A sparse 1 GiB file over a 1 MiB limit: refused from its size, in no time, nothing read. */
static void read_input_size_first(void **state)
{
    const char *dir = *state;
    char *p = mw_test_write_file(dir, "huge", "", 0);
    assert_int_equal(truncate(p, (off_t)1 << 30), 0);
    int w = mw_test_watch(p);
    char *text = NULL, want[900];
    size_t n = 0;
    expect_err(mw_fs_read_input(p, "a config", 1u << 20, MW_ECONFIG, &text, &n), MW_ECONFIG, "");
    snprintf(want, sizeof want, "%s: 1073741824 bytes; expected at most 1048576 (1 MiB)", p);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_false(mw_test_watch_events(w) & IN_ACCESS); /* opened for fstat, never read */
    free(p);
}

static void output_kind(void **state)
{
    const char *dir = *state;
    int sock = -1;
    make_specials(dir, &sock);
    char p[700];
    static const struct {
        const char *name, *kind; /* kind NULL: writable */
    } cases[] = {
        {"plain", NULL},           {"link-plain", NULL},
        {"new-file", NULL},        {"fifo", "a FIFO"},
        {"link-fifo", "a FIFO"},   {"sock", "a socket"},
        {"subdir", "a directory"}, {"dangling", "a symbolic link"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cases[i].name);
        const char *got = mw_fs_output_kind(p);
        if (cases[i].kind)
            assert_string_equal(got, cases[i].kind);
        else
            assert_null(got);
    }
    assert_string_equal(mw_fs_output_kind("/dev/null"), "a character device");
    assert_string_equal(mw_fs_kind(S_IFBLK), "a block device");
    assert_string_equal(mw_fs_kind(S_IFREG), "a regular file");
    close(sock);
}

/* Outputs opened for writing: a regular file (through a link too) truncated, a new one made; a
 * FIFO without a reader, a device and a directory refused untouched, never blocking. */
static void open_output(void **state)
{
    const char *dir = *state;
    int sock = -1;
    make_specials(dir, &sock);
    alarm(10);
    char p[700];
    int fd = -1;
    const char *kind = NULL;
    snprintf(p, sizeof p, "%s/link-plain", dir);
    assert_int_equal(mw_fs_open_output_errno(p, &fd, &kind), 0);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    snprintf(p, sizeof p, "%s/plain", dir);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0); /* truncated */
    snprintf(p, sizeof p, "%s/new", dir);
    assert_int_equal(mw_fs_open_output_errno(p, &fd, &kind), 0);
    close(fd);
    static const struct {
        const char *name, *kind;
    } refused[] = {{"fifo", "a FIFO"}, {"link-fifo", "a FIFO"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, refused[i].name);
        kind = NULL;
        const int e = mw_fs_open_output_errno(p, &fd, &kind);
        /* no reader: the non-blocking open itself fails (ENXIO), before any fstat */
        assert_true(e == ENXIO || (e == ENOTSUP && kind && !strcmp(kind, refused[i].kind)));
        assert_int_equal(fd, -1);
    }
    kind = NULL;
    assert_int_equal(mw_fs_open_output_errno("/dev/null", &fd, &kind), ENOTSUP);
    assert_string_equal(kind, "a character device");
    snprintf(p, sizeof p, "%s/subdir", dir);
    assert_int_equal(mw_fs_open_output_errno(p, &fd, &kind), EISDIR);
    alarm(0);
    close(sock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mkdir_p_nested_and_existing),
        cmocka_unit_test(mkdir_p_errors),
        cmocka_unit_test(join),
        cmocka_unit_test(write_atomic),
        mw_test_in_tmpdir(open_input_regular_only),
        mw_test_in_tmpdir(read_input_size_first),
        mw_test_in_tmpdir(output_kind),
        mw_test_in_tmpdir(open_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
