/* A compressed shard's plain copy (see shard_copy.h). */
#include "worker/data/shard_copy.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fs.h"

#define CACHE_DIR ".mwtrain-cache"

mw_status mw_shard_copy_path(const char *shard, const char *cache, char *out, size_t cap,
                             int *exists)
{
    return mw_shard_cache_path(shard, cache, "tfrecord", out, cap, exists);
}

mw_status mw_shard_cache_path(const char *shard, const char *cache, const char *ext, char *out,
                              size_t cap, int *exists)
{
    struct stat st;
    *exists = 0;
    if (stat(shard, &st) != 0)
        return mw_err(MW_EIO, "%s: %s", shard, strerror(errno));
    const char *slash = strrchr(shard, '/'), *base = slash ? slash + 1 : shard;
    const int dirlen = cache ? (int)strlen(cache) : slash ? (int)(slash - shard) : 1;
    const char *dir = cache ? cache : slash ? shard : ".";
    const int n =
        snprintf(out, cap, "%.*s/%s/%s.%lld-%lld.%09ld.%s", dirlen, dir, CACHE_DIR, base,
                 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, ext);
    if (n < 0 || (size_t)n >= cap)
        return mw_err(MW_EIO, "%s: the path of its kept %s file is too long", shard, ext);
    *exists = stat(out, &st) == 0 && S_ISREG(st.st_mode);
    return MW_OK;
}

mw_status mw_shard_copy_begin(mw_shard_copy *w, const char *path)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    MW_TRY(mw_fs_mkdir_p(dir, "the folder of decompressed shards (move it with --shard-cache)"));
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp-%ld", path, (long)getpid());
    if (!(w->f = fopen(w->tmp, "wb")))
        return mw_err(MW_EIO,
                      "%s: cannot write the decompressed copy of a compressed shard: %s; give "
                      "--shard-cache DIR, a folder with room for the uncompressed shards",
                      w->tmp, strerror(errno));
    return MW_OK;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

mw_status mw_shard_copy_add(mw_shard_copy *w, const uint8_t *data, size_t n, uint64_t *offset)
{
    uint8_t head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, mw_crc32c_mask(mw_crc32c(0, head, 8)), 4);
    put_le(tail, mw_crc32c_mask(mw_crc32c(0, data, n)), 4);
    *offset = w->at;
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail)
        return mw_err(MW_EIO, "%s: write error: %s (a full disk? --shard-cache DIR moves it)",
                      w->tmp, strerror(errno));
    w->at += sizeof head + n + sizeof tail;
    return MW_OK;
}

mw_status mw_shard_copy_end(mw_shard_copy *w, int ok)
{
    if (!w->f)
        return MW_OK;
    mw_status rc = MW_OK;
    if (fclose(w->f) != 0 && ok)
        rc = mw_err(MW_EIO, "%s: write error: %s", w->tmp, strerror(errno));
    w->f = NULL;
    if (ok && rc == MW_OK && rename(w->tmp, w->path) != 0)
        rc = mw_err(MW_EIO, "%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
    if (!ok || rc != MW_OK)
        unlink(w->tmp);
    return rc;
}
