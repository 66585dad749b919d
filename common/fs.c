/* mkdir -p, path join and atomic file replacement; see fs.h. These were three copies of mkdir -p
 * (train, checkpoint, summary) and the checkpoint's private atomic write. */
#include "common/fs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
    if (e) {
        unlink(tmp);
        return e;
    }
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
