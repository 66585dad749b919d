/* Shard discovery for TFRecord data (worker/data/tfrecord_shards.h): a file, a directory, or
 * a TFDS prefix, and the check that a TFDS set has every one of its N shards. */
#include "worker/data/tfrecord_shards.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "worker/data/tfrecord_index.h"

#define MAX_SHARDS 1000000u /* TFDS writes 5 digits; 6 are accepted */

void mw_tfrecord_shards_free(mw_tfrecord_shards *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->paths[i]);
    free(s->paths);
    s->paths = NULL;
    s->count = 0;
}

/* The decimal number of digits [p, end) (1..6 digits) in *v; 0 when it is none. */
static int number(const char *p, const char *end, unsigned *v)
{
    if (end <= p || end - p > 6)
        return 0;
    *v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        *v = *v * 10 + (unsigned)(*p - '0');
    }
    return 1;
}

int mw_tfrecord_shard_name(const char *name, unsigned *index, unsigned *total, size_t *plen,
                           size_t *split_at, size_t *split_len)
{
    static const char ext[] = ".tfrecord";
    const char *end = name + strlen(name), *of = NULL;
    for (const char *p = name; (p = strstr(p, "-of-")) != NULL; p++)
        of = p;
    if (!of || !number(of + 4, end, total))
        return 0;
    const char *dash = of;
    while (dash > name && dash[-1] >= '0' && dash[-1] <= '9')
        dash--;
    if (dash == name || dash[-1] != '-' || !number(dash, of, index) || *index >= *total ||
        *total > MAX_SHARDS)
        return 0;
    *plen = (size_t)(dash - 1 - name);
    if (*plen == 0)
        return 0;
    const char *split_end = name + *plen, *s;
    if (*plen >= sizeof ext - 1 && memcmp(split_end - (sizeof ext - 1), ext, sizeof ext - 1) == 0)
        split_end -= sizeof ext - 1; /* TFDS: NAME-SPLIT.tfrecord */
    for (s = split_end; s > name && s[-1] != '-';)
        s--;
    if (s == split_end)
        return 0;
    *split_at = (size_t)(s - name);
    *split_len = (size_t)(split_end - s);
    return 1;
}

/* The names in dir (no "." or ".."), sorted. */
static mw_status list_dir(const char *dir, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return mw_err(MW_EIO, "%s: cannot list: %s; expected a directory of TFRecord shards", dir,
                      strerror(errno));
    size_t cap = 0;
    mw_status rc = MW_OK;
    for (struct dirent *e; rc == MW_OK && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 64;
            char **n = realloc(*names, cap * sizeof *n);
            if (!n) {
                rc = mw_err(MW_ENOMEM, "%s: out of memory listing it", dir);
                break;
            }
            *names = n;
        }
        if (!((*names)[*count] = strdup(e->d_name)))
            rc = mw_err(MW_ENOMEM, "%s: out of memory listing it", dir);
        else
            (*count)++;
    }
    closedir(d);
    return rc;
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* s->paths[k] = dir/name. */
static mw_status put(mw_tfrecord_shards *s, size_t k, const char *dir, const char *name)
{
    if (!(s->paths[k] = mw_fs_join_alloc(dir, name)))
        return mw_err(MW_ENOMEM, "%s: out of memory", dir);
    return MW_OK;
}

/* The TFDS set in names whose prefix is want (when not NULL) or whose split is split: s
 * filled, *found the number of names that matched (0: none, s left empty). */
static mw_status tfds_set(mw_tfrecord_shards *s, const char *dir, char **names, size_t count,
                          const char *want, const char *split, size_t *found)
{
    const char *first = NULL;
    size_t flen = 0;
    unsigned total = 0;
    *found = 0;
    for (size_t i = 0; i < count; i++) {
        unsigned idx, tot;
        size_t plen, sat, slen;
        if (!mw_tfrecord_shard_name(names[i], &idx, &tot, &plen, &sat, &slen))
            continue;
        if (want ? strlen(want) != plen || memcmp(names[i], want, plen) != 0
                 : strlen(split) != slen || memcmp(names[i] + sat, split, slen) != 0)
            continue;
        if (!first) {
            first = names[i], flen = plen, total = tot;
            if (!(s->paths = calloc(tot, sizeof *s->paths)))
                return mw_err(MW_ENOMEM, "%s: out of memory for %u shard names", dir, tot);
            s->count = tot;
        } else if (plen != flen || memcmp(names[i], first, plen) != 0) {
            return mw_err(MW_EDATA,
                          "%s: shards of two data sets for split %s: %.*s and %.*s; "
                          "expected one (name the shards' prefix instead)",
                          dir, split, (int)flen, first, (int)plen, names[i]);
        } else if (tot != total) {
            return mw_err(MW_EDATA, "%s: shard %s says %u shards, %s says %u; expected one count",
                          dir, names[i], tot, first, total);
        }
        if (s->paths[idx])
            return mw_err(MW_EDATA, "%s: shard %u of %.*s named twice", dir, idx, (int)flen, first);
        MW_TRY(put(s, idx, dir, names[i]));
        (*found)++;
    }
    for (unsigned k = 0; first && k < total; k++)
        if (!s->paths[k])
            return mw_err(MW_EDATA,
                          "%s: TFDS shard %.*s-%05u-of-%05u is missing (%zu of %u found); "
                          "expected every shard 0..%u",
                          dir, (int)flen, first, k, total, *found, total, total - 1);
    return MW_OK;
}

/* The splits of the TFDS shards in names, for messages. */
static void splits_seen(char **names, size_t count, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        unsigned idx, tot;
        size_t plen, sat, slen;
        if (!mw_tfrecord_shard_name(names[i], &idx, &tot, &plen, &sat, &slen))
            continue;
        char one[64];
        snprintf(one, sizeof one, "%.*s", (int)slen, names[i] + sat);
        int seen = 0;
        for (const char *p = out; (p = strstr(p, one)) != NULL; p++)
            seen |= (p == out || p[-1] == ' ') && (p[strlen(one)] == ',' || !p[strlen(one)]);
        if (!seen && used + strlen(one) + 3 < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? ", " : "", one);
    }
}

/* 1 when name looks like a shard without TFDS naming. */
static int plain_shard_name(const char *name)
{
    size_t n = strlen(name);
    if (name[0] == '.')
        return 0;
    if (n > 6 && strcmp(name + n - 6, MW_TFRECORD_INDEX_SUFFIX) == 0)
        return 0;
    return (n >= 9 && strcmp(name + n - 9, ".tfrecord") == 0) ||
           (n >= 10 && strcmp(name + n - 10, ".tfrecords") == 0);
}

/* A directory's shards (TFDS-named of split, else every *.tfrecord file). */
static mw_status from_dir(mw_tfrecord_shards *s, const char *dir, char **names, size_t count,
                          const char *split)
{
    size_t found;
    MW_TRY(tfds_set(s, dir, names, count, NULL, split, &found));
    if (found)
        return MW_OK;
    char seen[256];
    splits_seen(names, count, seen, sizeof seen);
    if (seen[0])
        return mw_err(MW_EDATA, "%s: no %s shards (TFDS splits there: %s)", dir, split, seen);
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += (size_t)plain_shard_name(names[i]);
    if (n == 0)
        return mw_err(MW_EDATA,
                      "%s: no TFRecord shards (expected NAME-%s.tfrecord-00000-of-000NN files, or "
                      "files named *.tfrecord)",
                      dir, split);
    if (!(s->paths = calloc(n, sizeof *s->paths)))
        return mw_err(MW_ENOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < count; i++)
        if (plain_shard_name(names[i]))
            MW_TRY(put(s, s->count++, dir, names[i]));
    return MW_OK;
}

/* path names no file: a TFDS prefix DIR/NAME-SPLIT.tfrecord. */
static mw_status from_prefix(mw_tfrecord_shards *s, const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return mw_err(MW_EIO, "%s: no such file, directory or TFDS shard prefix", path);
    char **names;
    size_t count, found = 0;
    MW_TRY(list_dir(dir, &names, &count));
    mw_status rc = tfds_set(s, dir, names, count, slash ? slash + 1 : path, "", &found);
    free_names(names, count);
    if (rc == MW_OK && found == 0)
        rc = mw_err(MW_EIO,
                    "%s: no such file, directory or TFDS shard prefix (no %s-00000-of-NNNNN)", path,
                    slash ? slash + 1 : path);
    return rc;
}

mw_status mw_tfrecord_shards_find(mw_tfrecord_shards *s, const char *path, const char *split)
{
    s->count = 0;
    s->paths = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return from_prefix(s, path);
    if (S_ISDIR(st.st_mode)) {
        char **names;
        size_t count;
        MW_TRY(list_dir(path, &names, &count));
        if (count > 1) /* qsort of NULL is undefined even for 0 elements */
            qsort(names, count, sizeof *names, by_name);
        mw_status rc = from_dir(s, path, names, count, split);
        free_names(names, count);
        return rc;
    }
    if (!(s->paths = calloc(1, sizeof *s->paths)) || !(s->paths[0] = strdup(path)))
        return mw_err(MW_ENOMEM, "%s: out of memory", path);
    s->count = 1;
    return MW_OK;
}
