/* mkdir -p, path join and atomic file replacement; see fs.h. These were three copies of mkdir -p
 * (train, checkpoint, summary) and the checkpoint's private atomic write. The input helpers at
 * the end are the one way a reader opens a file the user names. */
#include "common/fs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/preempt.h"

int mw_fs_mkdir_p_errno(const char *dir, char *failed, size_t failed_cap)
{
    if (failed && failed_cap)
        failed[0] = '\0';
    char p[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0)
        return ENOENT;
    if (n >= sizeof p)
        return ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    /* Each prefix that ends before a '/' and then the whole path; "exists" is fine here, and
     * whether the last one is a directory is checked below. */
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            if (failed && failed_cap)
                snprintf(failed, failed_cap, "%s", p);
            return e;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

mw_status mw_fs_mkdir_p(const char *dir, const char *what)
{
    if (!*dir)
        return mw_err(MW_EINVAL, "%s: empty path", what);
    char failed[PATH_MAX];
    int e = mw_fs_mkdir_p_errno(dir, failed, sizeof failed);
    if (!e)
        return MW_OK;
    if (failed[0])
        return mw_err(MW_EIO, "%s %s: cannot create %s: %s", what, dir, failed, strerror(e));
    if (e == ENAMETOOLONG) /* the reason first: a message cut at its end still says why */
        return mw_err(MW_EIO, "%s: path too long (%zu bytes, at most %d): %s", what, strlen(dir),
                      PATH_MAX - 1, dir);
    return mw_err(MW_EIO, "%s %s: %s", what, dir, strerror(e));
}

mw_status mw_fs_join(char *out, size_t cap, const char *dir, const char *name)
{
    assert(cap > 0);
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n >= 0 && (size_t)n < cap)
        return MW_OK;
    out[0] = '\0';
    return mw_err(MW_EIO, "path too long (%zu bytes, at most %zu): %s/%s",
                  strlen(dir) + 1 + strlen(name), cap - 1, dir, name);
}

char *mw_fs_join_alloc(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int mw_fs_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP)
        e = errno; /* some file systems cannot sync a directory: nothing more to do there */
    close(fd);
    return e;
}

int mw_fs_write_atomic_errno(const char *path, const void *bytes, size_t nbytes, const char **step)
{
    char tmp[PATH_MAX];
    *step = "create";
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = mw_preempt_temp_create(tmp, O_WRONLY, 0644); /* removed if a signal ends us */
    if (fd < 0)
        return errno;
    const unsigned char *p = bytes;
    size_t done = 0;
    int e = 0;
    *step = "write";
    while (done < nbytes) {
        ssize_t n = write(fd, p + done, nbytes - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            e = n < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)n;
    }
    if (!e && fsync(fd) != 0)
        *step = "sync", e = errno;
    if (close(fd) != 0 && !e)
        *step = "close", e = errno;
    if (!e && rename(tmp, path) != 0)
        *step = "rename", e = errno;
    if (e)
        unlink(tmp);
    mw_preempt_temp_done(tmp);
    if (e)
        return e;
    /* The directory entry must be durable too, or a crash could bring back the old file. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    *step = "sync the directory of";
    return mw_fs_fsync_dir(dir);
}

mw_status mw_fs_write_atomic(const char *dir, const char *name, const void *bytes, size_t nbytes,
                             const char *what)
{
    char path[PATH_MAX];
    const char *step = "create";
    int e = ENAMETOOLONG; /* as the temporary file's name would be */
    if (snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
        e = mw_fs_write_atomic_errno(path, bytes, nbytes, &step);
    if (e)
        return mw_err(MW_EIO, "%s %s: cannot %s %s (%s)", what, dir, step, name, strerror(e));
    return MW_OK;
}

/* ---- inputs ---- */

const char *mw_fs_kind(unsigned mode)
{
    const mode_t m = (mode_t)mode;
    return S_ISREG(m)    ? "a regular file"
           : S_ISDIR(m)  ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "a special file";
}

/* "; expected WHAT", or "" without one. */
static void expected_note(char *buf, size_t cap, const char *expected)
{
    if (expected && *expected)
        snprintf(buf, cap, "; expected %s", expected);
    else
        buf[0] = '\0';
}

static mw_status not_regular(const char *path, mode_t mode, const char *expected)
{
    char note[256];
    expected_note(note, sizeof note, expected);
    return mw_err(MW_EIO, "%s: is %s, not a regular file%s", path, mw_fs_kind(mode), note);
}

mw_status mw_fs_open_input(const char *path, const char *expected, int *fd_out, size_t *nbytes)
{
    char note[256];
    *fd_out = -1;
    struct stat st;
    /* stat first: what is not a regular file is refused without being opened at all */
    if (stat(path, &st) != 0) {
        expected_note(note, sizeof note, expected);
        return mw_err(MW_EIO, "%s: cannot open: %s%s", path, strerror(errno), note);
    }
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode, expected);
    /* O_NONBLOCK: should the path have become a FIFO since the stat, the open returns at once */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        expected_note(note, sizeof note, expected);
        return mw_err(MW_EIO, "%s: cannot open: %s%s", path, strerror(errno), note);
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const mode_t mode = st.st_mode;
        close(fd);
        return not_regular(path, mode, expected);
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return mw_err(MW_EIO, "%s: %lld bytes: too large to read here", path,
                      (long long)st.st_size);
    }
    *fd_out = fd;
    *nbytes = (size_t)st.st_size;
    return MW_OK;
}

mw_status mw_fs_fopen_input(const char *path, const char *expected, FILE **f, size_t *nbytes)
{
    int fd;
    *f = NULL;
    MW_TRY(mw_fs_open_input(path, expected, &fd, nbytes));
    if (!(*f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return mw_err(MW_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    return MW_OK;
}

mw_status mw_fs_read_input(const char *path, const char *expected, size_t max, mw_status too_big,
                           char **text, size_t *nbytes)
{
    *text = NULL;
    *nbytes = 0;
    int fd;
    size_t size;
    MW_TRY(mw_fs_open_input(path, expected, &fd, &size));
    if (size > max) {
        close(fd);
        char lim[64];
        if (max % ((size_t)1 << 20) == 0)
            snprintf(lim, sizeof lim, "%zu MiB", max >> 20);
        else if (max % ((size_t)1 << 10) == 0)
            snprintf(lim, sizeof lim, "%zu KiB", max >> 10);
        else
            snprintf(lim, sizeof lim, "%zu bytes", max);
        return mw_err(too_big, "%s: %zu bytes; expected at most %zu (%s)", path, size, max, lim);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return mw_err(MW_ENOMEM, "%s: %zu bytes: out of memory", path, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            close(fd);
            free(buf);
            return mw_err(MW_EIO, "%s: read error after %zu of %zu bytes: %s", path, got, size,
                          e ? strerror(e) : "the file shrank while it was read");
        }
        got += (size_t)n;
    }
    close(fd);
    buf[size] = '\0';
    *text = buf;
    *nbytes = size;
    return MW_OK;
}

const char *mw_fs_output_kind(const char *path)
{
    struct stat st;
    /* a dangling symbolic link is refused: writing through it would create its target,
     * wherever that is */
    if (stat(path, &st) != 0)
        return lstat(path, &st) == 0 ? mw_fs_kind(st.st_mode) : NULL;
    return S_ISREG(st.st_mode) ? NULL : mw_fs_kind(st.st_mode);
}

int mw_fs_open_output_errno(const char *path, int *fd_out, const char **kind)
{
    *fd_out = -1;
    if (kind)
        *kind = NULL;
    const int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        if (kind)
            *kind = mw_fs_kind(st.st_mode);
        close(fd);
        return ENOTSUP;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (ftruncate(fd, 0) != 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        const int e = errno;
        close(fd);
        return e;
    }
    *fd_out = fd;
    return 0;
}

int mw_fs_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        if (k == 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}
