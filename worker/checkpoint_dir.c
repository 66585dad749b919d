/* The checkpoint directory (worker/checkpoint_dir.h): ckpt-N files in TensorFlow's layout,
 * the `checkpoint` index naming the latest and the kept ones, retention, and the leftovers
 * of interrupted saves. The files themselves are worker/checkpoint.c's.
 *
 * Directory writes follow one order so that a crash or an error at any point leaves a
 * consistent directory: the new ckpt-N is made durable, then the index is replaced, then old
 * checkpoints are deleted. A crash leaves at most a temporary file, which is never taken for a
 * checkpoint. The index is trusted only to name files inside its directory. */
#include "worker/checkpoint_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"

#define MAX_INDEX_NBYTES (1u << 20)

/* ---- the directory ---- */

typedef struct {
    char **names; /* owned strings, as the index writes them */
    int count, cap;
} name_list;

static void names_free(name_list *l)
{
    for (int i = 0; i < l->count; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static int names_has(const name_list *l, const char *s)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->names[i], s) == 0)
            return 1;
    return 0;
}

static mw_status names_add(name_list *l, const char *s, size_t n)
{
    if (l->count == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **p = realloc(l->names, sizeof *p * (size_t)cap);
        if (!p)
            return mw_err(MW_ENOMEM, "out of memory listing checkpoints");
        l->names = p;
        l->cap = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return mw_err(MW_ENOMEM, "out of memory listing checkpoints");
    memcpy(copy, s, n);
    copy[n] = '\0';
    l->names[l->count++] = copy;
    return MW_OK;
}

/* N for a name "ckpt-N" (N in 1..INT_MAX-1, no leading zeros), or 0 for any other name. */
static int ckpt_number(const char *name)
{
    if (strncmp(name, "ckpt-", 5) != 0 || name[5] < '1' || name[5] > '9')
        return 0;
    long v = 0;
    for (const char *s = name + 5; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT_MAX - 1) / 10)
            return 0;
        v = v * 10 + (*s - '0');
    }
    return v < INT_MAX ? (int)v : 0;
}

/* Whether name is a temporary file of an atomic write here: ckpt-N.tmp-PID or
 * checkpoint.tmp-PID (common/fs.h). */
static int temp_name(const char *name)
{
    const char *t = strstr(name, ".tmp-");
    if (!t || !t[5])
        return 0;
    for (const char *s = t + 5; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    char base[32];
    size_t n = (size_t)(t - name);
    if (n >= sizeof base)
        return 0;
    memcpy(base, name, n);
    base[n] = '\0';
    return strcmp(base, MW_CKPT_INDEX) == 0 || ckpt_number(base) > 0;
}

/* Whether an index entry names a file inside the directory: no '/', not "." or "..". */
static int plain_name(const char *name)
{
    return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* Parse the index text. Keys other than the two path keys (TensorFlow also writes
 * timestamps) are skipped. Returns 0, or the 1-based number of the first line that is not
 * `key: value`, or -1 for a path value that is not a plain quoted string. */
static int index_parse(const char *text, size_t n, name_list *all, char **latest)
{
    int line = 0;
    const char *s = text, *end = text + n;
    while (s < end) {
        line++;
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol)
            eol = end;
        const char *k = s;
        s = eol + 1;
        while (k < eol && (*k == ' ' || *k == '\t' || *k == '\r'))
            k++;
        if (k == eol)
            continue;
        const char *colon = memchr(k, ':', (size_t)(eol - k));
        if (!colon)
            return line;
        size_t klen = (size_t)(colon - k);
        while (klen && (k[klen - 1] == ' ' || k[klen - 1] == '\t'))
            klen--;
        int is_latest = klen == 21 && memcmp(k, "model_checkpoint_path", 21) == 0;
        int is_all = klen == 26 && memcmp(k, "all_model_checkpoint_paths", 26) == 0;
        if (!is_latest && !is_all)
            continue;
        const char *v = colon + 1, *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
            ve--;
        if (ve - v < 3 || *v != '"' || ve[-1] != '"')
            return line;
        v++, ve--;
        for (const char *q = v; q < ve; q++)
            if (*q == '"' || *q == '\\' || *q == '\0')
                return line;
        if (is_latest) {
            free(*latest);
            if (!(*latest = malloc((size_t)(ve - v) + 1)))
                return -1;
            memcpy(*latest, v, (size_t)(ve - v));
            (*latest)[ve - v] = '\0';
        } else if (names_add(all, v, (size_t)(ve - v)) != MW_OK) {
            return -1;
        }
    }
    return 0;
}

/* The index's text (at most MAX_INDEX_NBYTES) into *text, malloc'ed and NUL-terminated, without
 * following a symbolic link or blocking on a FIFO. Returns 0, ENOENT when there is none, another
 * errno, or EFBIG. */
static int index_text(const char *path, char **text, size_t *n)
{
    *text = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (!e && st.st_size >= (off_t)MAX_INDEX_NBYTES)
        e = EFBIG;
    if (!e && !(*text = malloc((size_t)st.st_size + 1)))
        e = ENOMEM;
    if (!e && (e = mw_fs_pread_full(fd, *text, (size_t)st.st_size, 0)) < 0)
        e = EIO; /* it shrank while being read */
    close(fd);
    if (e) {
        free(*text);
        *text = NULL;
        return e;
    }
    *n = (size_t)st.st_size;
    (*text)[*n] = '\0';
    return 0;
}

/* Read dir's index into all (oldest first) and *latest. Returns 1 when it was read, 0 when
 * there is none, -1 when it is unusable (with warn set, a warning says why). */
static int index_read(const char *dir, name_list *all, char **latest, int warn)
{
    char *path = mw_fs_join_alloc(dir, MW_CKPT_INDEX), *text = NULL;
    size_t n = 0;
    int e = path ? index_text(path, &text, &n) : ENOMEM;
    int line = e ? 0 : index_parse(text, n, all, latest);
    free(text);
    if (warn && e == EFBIG)
        mw_log_warn("checkpoint index %s: larger than %u bytes; looking at the ckpt-N files", path,
                    MAX_INDEX_NBYTES);
    else if (warn && e == EINVAL)
        mw_log_warn("checkpoint index %s: not a regular file; looking at the ckpt-N files", path);
    else if (warn && e == ELOOP)
        mw_log_warn("checkpoint index %s: a symbolic link (not followed); looking at the ckpt-N "
                    "files",
                    path);
    else if (warn && e && e != ENOENT)
        mw_log_warn("checkpoint index %s: cannot read it (%s); looking at the ckpt-N files",
                    path ? path : MW_CKPT_INDEX, strerror(e));
    else if (warn && line == -1)
        mw_log_warn("checkpoint index %s: cannot read it; looking at the ckpt-N files", path);
    else if (warn && line)
        mw_log_warn("checkpoint index %s: line %d is not `key: \"value\"`; looking at the "
                    "ckpt-N files",
                    path, line);
    free(path);
    if (e || line) {
        names_free(all);
        free(*latest);
        *latest = NULL;
    }
    return e == ENOENT ? 0 : e || line ? -1 : 1;
}

/* The index's entries, newest first without repeats (its latest, then its list from the end),
 * into names (may be NULL). Entries that name anything but a file inside dir go to outside
 * instead (may be NULL) and are never opened; with warn set each gets a warning, as does an
 * unusable index. *state (may be NULL): as index_read returns. */
static mw_status index_entries(const char *dir, name_list *names, name_list *outside, int warn,
                               int *state)
{
    name_list all = {0}, in = {0}, out = {0};
    char *latest = NULL;
    int st = index_read(dir, &all, &latest, warn);
    mw_status rc = MW_OK;
    for (int i = all.count; i >= 0 && rc == MW_OK; i--) {
        const char *s = i == all.count ? latest : all.names[i];
        if (!s || names_has(&in, s) || names_has(&out, s))
            continue;
        int ok = plain_name(s);
        if (!ok && warn)
            mw_log_warn("checkpoint index %s/%s: ignoring the entry \"%s\" (expected the name "
                        "of a file inside %s: no '/', not '..'); it is not opened",
                        dir, MW_CKPT_INDEX, s, dir);
        rc = names_add(ok ? &in : &out, s, strlen(s));
    }
    for (int i = 0; i < in.count && rc == MW_OK && names; i++)
        rc = names_add(names, in.names[i], strlen(in.names[i]));
    for (int i = 0; i < out.count && rc == MW_OK && outside; i++)
        rc = names_add(outside, out.names[i], strlen(out.names[i]));
    names_free(&all);
    names_free(&in);
    names_free(&out);
    free(latest);
    if (state)
        *state = st;
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The numbers of the ckpt-N entries of dir, ascending, into *nums (malloc'ed). Returns 0 or an
 * errno from opendir. */
static int scan_dir(const char *dir, int **nums, int *count)
{
    *nums = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n = ckpt_number(e->d_name);
        if (!n)
            continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            int *p = realloc(*nums, sizeof *p * (size_t)cap);
            if (!p) {
                closedir(d);
                return ENOMEM;
            }
            *nums = p;
        }
        (*nums)[(*count)++] = n;
    }
    closedir(d);
    if (*count > 1)
        qsort(*nums, (size_t)*count, sizeof **nums, cmp_int);
    return 0;
}

/* The number for a new checkpoint: one above every ckpt-N in the directory (nums, ascending)
 * and in its index. */
static mw_status next_number(const char *dir, const int *nums, int count, int *n)
{
    name_list idx = {0};
    char *latest = NULL;
    int highest = count ? nums[count - 1] : 0;
    index_read(dir, &idx, &latest, 1); /* entries naming other directories count for nothing */
    for (int i = 0; i < idx.count; i++)
        if (ckpt_number(idx.names[i]) > highest)
            highest = ckpt_number(idx.names[i]);
    if (latest && ckpt_number(latest) > highest)
        highest = ckpt_number(latest);
    names_free(&idx);
    free(latest);
    if (highest >= INT_MAX - 1)
        return mw_err(MW_EIO, "checkpoint directory %s: ckpt-%d is the highest number possible",
                      dir, highest);
    *n = highest + 1;
    return MW_OK;
}

/* Replace dir's index with one naming ckpt-n as the latest and nums[first..count) as the
 * kept checkpoints. name: the new checkpoint's file, for the message. */
static mw_status write_index(const char *dir, const int *nums, int first, int count, int n,
                             const char *name)
{
    size_t cap = 64 + (size_t)(count - first) * 64;
    char *text = malloc(cap);
    if (!text)
        return mw_err(MW_ENOMEM, "out of memory saving a checkpoint");
    size_t len = (size_t)snprintf(text, cap, "model_checkpoint_path: \"ckpt-%d\"\n", n);
    for (int i = first; i < count; i++)
        len += (size_t)snprintf(text + len, cap - len, "all_model_checkpoint_paths: \"ckpt-%d\"\n",
                                nums[i]);
    char *path = mw_fs_join_alloc(dir, MW_CKPT_INDEX);
    if (!path) {
        free(text);
        return mw_err(MW_ENOMEM, "out of memory saving a checkpoint");
    }
    const char *step;
    mw_status rc = MW_OK;
    int e = mw_fs_write_atomic_errno(path, text, len, &step);
    if (e)
        rc = mw_err(MW_EIO,
                    "checkpoint directory %s: cannot %s the index '%s' (%s); %s was "
                    "written but is not listed",
                    dir, step, MW_CKPT_INDEX, strerror(e), name);
    free(path);
    free(text);
    return rc;
}

/* Delete ckpt-N for the first `first` numbers of nums; a failure only warns, since the index
 * no longer names them. */
static void delete_oldest(const char *dir, const int *nums, int first)
{
    for (int i = 0; i < first; i++) {
        char old[32];
        snprintf(old, sizeof old, "ckpt-%d", nums[i]);
        char *p = mw_fs_join_alloc(dir, old);
        if (p && unlink(p) != 0 && errno != ENOENT)
            mw_log_warn("checkpoint directory %s: cannot delete the old %s (%s)", dir, old,
                        strerror(errno));
        free(p);
    }
}

mw_status mw_ckpt_save(const char *dir, const mw_ckpt *c, int keep, int *number_out)
{
    mw_status rc = MW_OK;
    void *data = NULL;
    size_t nbytes = 0;
    int *nums = NULL, count = 0, n = 0;

    MW_TRY_GOTO(mw_ckpt_serialize(c, &data, &nbytes), rc, done);
    int e = mw_fs_mkdir_p_errno(dir, NULL, 0);
    if (e) {
        rc = mw_err(MW_EIO, "checkpoint directory %s: cannot create it (%s)", dir, strerror(e));
        goto done;
    }
    if ((e = scan_dir(dir, &nums, &count))) {
        rc = mw_err(MW_EIO, "checkpoint directory %s: cannot list it (%s)", dir, strerror(e));
        goto done;
    }
    MW_TRY_GOTO(next_number(dir, nums, count, &n), rc, done);

    char name[32];
    snprintf(name, sizeof name, "ckpt-%d", n);
    MW_TRY_GOTO(mw_fs_write_atomic(dir, name, data, nbytes, "checkpoint directory"), rc, done);

    /* Kept: the newest `keep` of the existing checkpoints and the new one. */
    int *kept = realloc(nums, sizeof *kept * (size_t)(count + 1));
    if (!kept) {
        rc = mw_err(MW_ENOMEM, "out of memory saving a checkpoint");
        goto done;
    }
    nums = kept;
    nums[count++] = n;
    int first = keep > 0 && count > keep ? count - keep : 0;
    MW_TRY_GOTO(write_index(dir, nums, first, count, n, name), rc, done);
    /* Only now that the index no longer names them: delete the oldest. */
    delete_oldest(dir, nums, first);
    if (number_out)
        *number_out = n;
done:
    free(data);
    free(nums);
    return rc;
}

/* Append "name (reason)" (or "name" when reason is NULL) to a comma-separated list in buf,
 * stopping before it gets too long for a message: *more counts what was left off. */
static void tried_add(char *buf, size_t cap, int *shown, int *more, const char *name,
                      const char *reason)
{
    size_t len = strlen(buf);
    size_t need = strlen(name) + (reason ? strlen(reason) : 0) + 6;
    if (*more || len + need > cap - 32) {
        (*more)++;
        return;
    }
    if (reason)
        snprintf(buf + len, cap - len, "%s%s (%s)", *shown ? ", " : "", name, reason);
    else
        snprintf(buf + len, cap - len, "%s%s", *shown ? ", " : "", name);
    (*shown)++;
}

static void tried_end(char *buf, size_t cap, int more)
{
    if (more)
        snprintf(buf + strlen(buf), cap - strlen(buf), ", and %d more", more);
}

/* The checkpoints of dir to try, newest first, into cand: the index's latest, its list
 * backwards (only names of files inside dir), then the other ckpt-N files. An error when there
 * are none. */
static mw_status list_candidates(const char *dir, name_list *cand)
{
    mw_status rc = MW_OK;
    int *nums = NULL, count = 0;

    MW_TRY_GOTO(index_entries(dir, cand, NULL, 1, NULL), rc, done);
    int e = scan_dir(dir, &nums, &count);
    if (e == ENOMEM) {
        rc = mw_err(MW_ENOMEM, "out of memory listing checkpoints");
        goto done;
    }
    if (e && e != ENOENT && e != ENOTDIR) {
        rc = mw_err(MW_EIO, "checkpoint directory %s: cannot list it (%s)", dir, strerror(e));
        goto done;
    }
    for (int i = count - 1; i >= 0; i--) {
        char name[32];
        snprintf(name, sizeof name, "ckpt-%d", nums[i]);
        if (!names_has(cand, name))
            MW_TRY_GOTO(names_add(cand, name, strlen(name)), rc, done);
    }
    if (cand->count == 0)
        rc = mw_err(MW_ECKPT, "no checkpoint in %s%s", dir,
                    e == ENOENT ? " (the directory does not exist)"
                    : e         ? " (not a directory)"
                                : "");
done:
    free(nums);
    return rc;
}

/* Read the candidates in order into c until one is valid, warning about each unusable one;
 * an error naming them all (as far as the message has room) when none is. */
static mw_status load_first_valid(const char *dir, const name_list *cand, mw_ckpt *c,
                                  char **path_out)
{
    mw_status rc;
    char tried[900] = "";
    int shown = 0, more = 0;
    for (int i = 0; i < cand->count; i++) {
        const char *name = cand->names[i];
        char *path = mw_fs_join_alloc(dir, name); /* a plain name: list_candidates */
        if (!path)
            return mw_err(MW_ENOMEM, "out of memory loading a checkpoint");
        mw_ckpt t;
        mw_ckpt_init(&t);
        rc = mw_ckpt_read(&t, path);
        if (rc == MW_OK) {
            mw_ckpt_free(c);
            *c = t;
            if (path_out)
                *path_out = path;
            else
                free(path);
            return rc;
        }
        if (rc == MW_ENOMEM) {
            free(path);
            return rc;
        }
        /* Unusable: say so, remember why without the path prefix, and try the previous one. */
        const char *msg = mw_err_msg();
        size_t plen = strlen(path);
        const char *reason =
            strncmp(msg, path, plen) == 0 && msg[plen] == ':' ? msg + plen + 2 : msg;
        mw_log_warn("checkpoint %s is unusable: %s; %s", path, reason,
                    i + 1 < cand->count ? "trying the previous one" : "none left to try");
        tried_add(tried, sizeof tried, &shown, &more, name, reason);
        mw_err_clear();
        free(path);
    }
    tried_end(tried, sizeof tried, more);
    return mw_err(MW_ECKPT, "no valid checkpoint in %s (tried: %s)", dir, tried);
}

mw_status mw_ckpt_load_latest(const char *dir, mw_ckpt *c, char **path_out)
{
    if (path_out)
        *path_out = NULL;
    name_list cand = {0};
    mw_status rc = list_candidates(dir, &cand);
    if (rc == MW_OK)
        rc = load_first_valid(dir, &cand, c, path_out);
    names_free(&cand);
    return rc;
}

/* ---- what a directory holds ---- */

/* Whether dir/name is worth reading: a non-empty regular file, or a symbolic link (refused when
 * read, but a user's deliberate layout, not a leftover). Otherwise why not, into *why. */
static int entry_complete(const char *dir, const char *name, const char **why)
{
    char *p = mw_fs_join_alloc(dir, name);
    struct stat st;
    int e = !p ? ENOMEM : lstat(p, &st) != 0 ? errno : 0;
    free(p);
    *why = NULL;
    if (e == ENOENT)
        *why = "missing";
    else if (e) /* cannot tell: let the reader say what is wrong */
        return 1;
    else if (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_size > 0))
        return 1;
    else
        *why = S_ISREG(st.st_mode) ? "an empty file" : mw_fs_kind(st.st_mode);
    return 0;
}

/* The directory's own entries: ckpt-N files and leftover temporary files. seen gets the ckpt-N
 * names. */
static mw_status survey_listing(const char *dir, mw_ckpt_survey *sv, name_list *seen, int *shown,
                                int *more)
{
    DIR *d = opendir(dir);
    if (!d && errno != ENOENT && errno != ENOTDIR)
        return mw_err(MW_EIO, "checkpoint directory %s: cannot list it (%s)", dir, strerror(errno));
    mw_status rc = MW_OK;
    for (struct dirent *e; d && rc == MW_OK && (e = readdir(d));) {
        const char *why = "temporary file";
        if (!temp_name(e->d_name)) {
            if (!ckpt_number(e->d_name))
                continue;
            rc = names_add(seen, e->d_name, strlen(e->d_name));
            if (entry_complete(dir, e->d_name, &why))
                sv->complete++;
        }
        if (why)
            tried_add(sv->debris, sizeof sv->debris, shown, more, e->d_name, why);
    }
    if (d)
        closedir(d);
    return rc;
}

mw_status mw_ckpt_survey_dir(const char *dir, mw_ckpt_survey *sv)
{
    memset(sv, 0, sizeof *sv);
    name_list seen = {0}, idx = {0}, outside = {0};
    int shown = 0, more = 0, state = 0;
    mw_status rc = survey_listing(dir, sv, &seen, &shown, &more);
    if (rc == MW_OK)
        rc = index_entries(dir, &idx, &outside, 0, &state);
    if (state < 0)
        tried_add(sv->debris, sizeof sv->debris, &shown, &more, MW_CKPT_INDEX, "an unusable index");
    char why[320];
    for (int i = 0; i < idx.count && rc == MW_OK; i++) {
        const char *w = NULL;
        if (names_has(&seen, idx.names[i])) /* counted above */
            continue;
        if (entry_complete(dir, idx.names[i], &w)) {
            sv->complete++;
            continue;
        }
        snprintf(why, sizeof why, "index entry %.256s: %s", idx.names[i], w);
        tried_add(sv->debris, sizeof sv->debris, &shown, &more, MW_CKPT_INDEX, why);
    }
    for (int i = 0; i < outside.count && rc == MW_OK; i++) {
        snprintf(why, sizeof why, "index entry %.256s: outside the directory", outside.names[i]);
        tried_add(sv->debris, sizeof sv->debris, &shown, &more, MW_CKPT_INDEX, why);
    }
    tried_end(sv->debris, sizeof sv->debris, more);
    names_free(&seen);
    names_free(&idx);
    names_free(&outside);
    return rc;
}

int mw_ckpt_remove_temps(const char *dir, char *removed, size_t cap)
{
    int n = 0, shown = 0, more = 0;
    removed[0] = '\0';
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!temp_name(e->d_name))
            continue;
        char *p = mw_fs_join_alloc(dir, e->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            if (unlink(p) == 0) {
                n++;
                tried_add(removed, cap, &shown, &more, e->d_name, NULL);
            } else {
                mw_log_warn("checkpoint directory %s: cannot delete the leftover %s (%s)", dir,
                            e->d_name, strerror(errno));
            }
        }
        free(p);
    }
    if (d)
        closedir(d);
    tried_end(removed, cap, more);
    return n;
}
