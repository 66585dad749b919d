/* The memory this process may use; see sysmem.h. */
#include "common/sysmem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PATH_CAP 4096
#define NO_LIMIT (UINT64_C(1) << 60) /* v1 writes "none" as about 2^63 */

/* The hierarchy that holds the memory controller: where its files are and what it calls
 * this process's cgroup. */
typedef struct {
    mw_sysmem_source version;  /* MW_SYSMEM_CGROUP_V1 or _V2 */
    char path[PATH_CAP];       /* from /proc/self/cgroup: "/kubepods/pod1" */
    char mount[PATH_CAP];      /* where the hierarchy is mounted */
    char mount_root[PATH_CAP]; /* the cgroup seen at the mount point ("/" unless a container) */
    const char *limit_file, *usage_file;
} hierarchy;

/* The first line of path as one unsigned number, or "max" (*is_max). 0 when missing or not
 * a number. */
static int read_u64(const char *path, uint64_t *v, int *is_max)
{
    char buf[64];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!line)
        return 0;
    buf[strcspn(buf, " \t\r\n")] = '\0';
    *is_max = strcmp(buf, "max") == 0;
    if (*is_max)
        return 1;
    if (buf[0] < '0' || buf[0] > '9')
        return 0;
    char *end = NULL;
    unsigned long long x = strtoull(buf, &end, 10);
    if (*end != '\0')
        return 0;
    *v = (uint64_t)x;
    return 1;
}

/* Does the comma-separated list hold word? */
static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static void copy(char *dst, const char *src)
{
    snprintf(dst, PATH_CAP, "%s", src);
}

/* /proc/self/cgroup: "0::/path" (v2) or "N:ctrl,memory:/path" (v1). The v1 memory line wins
 * over the v2 line (the memory controller sits in one hierarchy only; on a hybrid system the
 * v2 one lacks it). 0 when neither is there. */
static int find_cgroup(hierarchy *h, const char *proc_root)
{
    char fn[PATH_CAP], line[PATH_CAP + 64];
    snprintf(fn, sizeof fn, "%s/self/cgroup", proc_root);
    FILE *f = fopen(fn, "r");
    if (!f)
        return 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = *c2 = '\0';
        if (has_word(c1 + 1, "memory")) {
            h->version = MW_SYSMEM_CGROUP_V1;
            copy(h->path, c2 + 1);
            found = 1;
            break;
        }
        if (strcmp(line, "0") == 0 && c1[1] == '\0' && !found) {
            h->version = MW_SYSMEM_CGROUP_V2;
            copy(h->path, c2 + 1);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *out = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *out++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
}

/* One mountinfo line: "id parent maj:min root mountpoint opts [tags] - fstype source super".
 * 1 when it mounts h's hierarchy (cgroup2; cgroup with "memory" in super), filling h. */
static int match_mount(hierarchy *h, char *line)
{
    char *save = NULL, *tok[6] = {0};
    int n = 0;
    for (char *t = strtok_r(line, " \n", &save); t && n < 6; t = strtok_r(NULL, " \n", &save))
        tok[n++] = t;
    if (n < 6)
        return 0;
    char *t = NULL;
    while ((t = strtok_r(NULL, " \n", &save)) && strcmp(t, "-") != 0) {
    }
    char *fstype = t ? strtok_r(NULL, " \n", &save) : NULL;
    char *source = fstype ? strtok_r(NULL, " \n", &save) : NULL;
    char *super = source ? strtok_r(NULL, " \n", &save) : NULL;
    if (!fstype)
        return 0;
    int v2 = h->version == MW_SYSMEM_CGROUP_V2 && strcmp(fstype, "cgroup2") == 0;
    int v1 = h->version == MW_SYSMEM_CGROUP_V1 && strcmp(fstype, "cgroup") == 0 && super &&
             has_word(super, "memory");
    if (!v1 && !v2)
        return 0;
    unescape(tok[3]), unescape(tok[4]);
    copy(h->mount_root, tok[3]);
    copy(h->mount, tok[4]);
    return 1;
}

/* Where the hierarchy is mounted: mountinfo's word, else cgroup_root (v2) or
 * cgroup_root/memory (v1) with the whole hierarchy visible. */
static void find_mount(hierarchy *h, const char *proc_root, const char *cgroup_root)
{
    char fn[PATH_CAP], line[3 * PATH_CAP];
    snprintf(fn, sizeof fn, "%s/self/mountinfo", proc_root);
    FILE *f = fopen(fn, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = match_mount(h, line);
    if (f)
        fclose(f);
    if (found)
        return;
    copy(h->mount_root, "/");
    snprintf(h->mount, sizeof h->mount, "%s%s", cgroup_root,
             h->version == MW_SYSMEM_CGROUP_V1 ? "/memory" : "");
}

/* The inactive file cache of a cgroup (memory.stat's inactive_file in v2, total_inactive_file
 * in v1: pages of files read once, which the kernel reclaims before it would kill anything),
 * 0 when unknown. A process that has just loaded its libraries (oneDNN, OpenBLAS: 80 MB) or
 * read its data in a small cgroup has its usage filled with such pages. */
static uint64_t reclaimable(const hierarchy *h, const char *dir)
{
    char fn[PATH_CAP], line[256];
    const char *key = h->version == MW_SYSMEM_CGROUP_V2 ? "inactive_file " : "total_inactive_file ";
    int n = snprintf(fn, sizeof fn, "%s/memory.stat", dir);
    FILE *f = n < 0 || (size_t)n >= sizeof fn ? NULL : fopen(fn, "r");
    unsigned long long v = 0;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strncmp(line, key, strlen(key)) == 0 && sscanf(line + strlen(key), "%llu", &v) == 1;
    if (f)
        fclose(f);
    return found ? (uint64_t)v : 0;
}

/* The limit and usage at one cgroup directory; 0 when it has no limit or no readable one. The
 * usage leaves out the inactive file cache (reclaimable). */
static int level_bound(const hierarchy *h, const char *dir, uint64_t *limit, uint64_t *usage)
{
    char fn[PATH_CAP];
    int is_max = 0, n = snprintf(fn, sizeof fn, "%s/%s", dir, h->limit_file);
    if (n < 0 || (size_t)n >= sizeof fn || !read_u64(fn, limit, &is_max) || is_max ||
        *limit >= NO_LIMIT)
        return 0;
    n = snprintf(fn, sizeof fn, "%s/%s", dir, h->usage_file);
    if (n < 0 || (size_t)n >= sizeof fn || !read_u64(fn, usage, &is_max) || is_max)
        *usage = 0; /* a limit without a readable usage still bounds */
    const uint64_t cache = reclaimable(h, dir);
    *usage = *usage > cache ? *usage - cache : 0;
    return 1;
}

/* Walk from the process's cgroup up to the mount, keeping the level with the least
 * headroom. 1 when some level has a limit. */
static int cgroup_bound(const hierarchy *h, mw_sysmem *out)
{
    /* the part of the path below the mount's root */
    const char *rel = h->path;
    size_t rlen = strlen(h->mount_root);
    if (strcmp(h->mount_root, "/") != 0 && strncmp(h->path, h->mount_root, rlen) == 0 &&
        (h->path[rlen] == '/' || h->path[rlen] == '\0'))
        rel = h->path + rlen;
    char sub[PATH_CAP], dir[2 * PATH_CAP];
    copy(sub, rel);
    int found = 0;
    for (;;) {
        size_t n = strlen(sub);
        while (n > 0 && sub[n - 1] == '/')
            sub[--n] = '\0';
        snprintf(dir, sizeof dir, "%s%s", h->mount, sub);
        uint64_t limit = 0, usage = 0;
        if (level_bound(h, dir, &limit, &usage)) {
            uint64_t avail = limit > usage ? limit - usage : 0;
            if (!found || avail < out->available) {
                out->limit = limit, out->usage = usage, out->available = avail;
                snprintf(out->cgroup, sizeof out->cgroup, "%s%s",
                         strcmp(h->mount_root, "/") == 0 ? "" : h->mount_root, sub);
                if (!out->cgroup[0])
                    snprintf(out->cgroup, sizeof out->cgroup, "/");
            }
            found = 1;
        }
        char *slash = strrchr(sub, '/');
        if (!slash || n == 0)
            break;
        *slash = '\0';
    }
    if (found)
        out->source = h->version;
    return found;
}

/* MemAvailable (else MemFree) and MemTotal, in bytes. */
static int meminfo_bound(const char *proc_root, mw_sysmem *out)
{
    char fn[PATH_CAP], line[256];
    snprintf(fn, sizeof fn, "%s/meminfo", proc_root);
    FILE *f = fopen(fn, "r");
    if (!f)
        return 0;
    unsigned long long total = 0, avail = 0, mfree = 0, kb;
    int have_total = 0, have_avail = 0, have_free = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            total = kb, have_total = 1;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb, have_avail = 1;
        else if (sscanf(line, "MemFree: %llu kB", &kb) == 1)
            mfree = kb, have_free = 1;
    }
    fclose(f);
    if (!have_avail && !have_free)
        return 0;
    const uint64_t a = (uint64_t)(have_avail ? avail : mfree) * 1024;
    const uint64_t t = have_total ? (uint64_t)total * 1024 : a;
    out->source = MW_SYSMEM_MEMINFO;
    out->limit = t > a ? t : a;
    out->available = a;
    out->usage = out->limit - a;
    out->cgroup[0] = '\0';
    return 1;
}

mw_sysmem_source mw_sysmem_query_at(mw_sysmem *out, const char *proc_root, const char *cgroup_root)
{
    memset(out, 0, sizeof *out);
    hierarchy *h = calloc(1, sizeof *h);
    if (h && find_cgroup(h, proc_root)) {
        h->limit_file = h->version == MW_SYSMEM_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes";
        h->usage_file =
            h->version == MW_SYSMEM_CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes";
        find_mount(h, proc_root, cgroup_root);
        cgroup_bound(h, out);
    }
    free(h);
    mw_sysmem mi;
    memset(&mi, 0, sizeof mi);
    /* the machine may have less free than the cgroup allows */
    if (meminfo_bound(proc_root, &mi) &&
        (out->source == MW_SYSMEM_NONE || mi.available < out->available))
        *out = mi;
    return out->source;
}

mw_sysmem_source mw_sysmem_query(mw_sysmem *out)
{
    return mw_sysmem_query_at(out, "/proc", "/sys/fs/cgroup");
}

const char *mw_sysmem_bytes_str(char *buf, size_t cap, uint64_t nbytes)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (nbytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)nbytes);
        return buf;
    }
    double v = (double)nbytes / 1024.0;
    int u = 0;
    while (v >= 1023.95 && u < 5)
        v /= 1024.0, u++;
    snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

const char *mw_sysmem_describe(const mw_sysmem *m, char *buf, size_t nbytes)
{
    char a[32], b[32];
    switch (m->source) {
    case MW_SYSMEM_CGROUP_V1:
    case MW_SYSMEM_CGROUP_V2:
        snprintf(buf, nbytes, "cgroup %s of %s: limit %s, %s in use",
                 m->source == MW_SYSMEM_CGROUP_V2 ? "v2 memory.max" : "v1 memory.limit_in_bytes",
                 m->cgroup, mw_sysmem_bytes_str(a, sizeof a, m->limit),
                 mw_sysmem_bytes_str(b, sizeof b, m->usage));
        break;
    case MW_SYSMEM_MEMINFO:
        snprintf(buf, nbytes, "/proc/meminfo: MemAvailable %s of MemTotal %s",
                 mw_sysmem_bytes_str(a, sizeof a, m->available),
                 mw_sysmem_bytes_str(b, sizeof b, m->limit));
        break;
    default:
        snprintf(buf, nbytes, "no memory information");
    }
    return buf;
}

/* ---- a load checked before it is made ---- */

static int load_share = 1;

void mw_sysmem_set_share(int ranks)
{
    load_share = ranks > 1 ? ranks : 1;
}

int mw_sysmem_check_enabled(void)
{
    const char *v = getenv("MW_MEMORY_CHECK");
    if (!v)
        return 1;
    return !(strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0 ||
             strcasecmp(v, "false") == 0);
}

mw_status mw_sysmem_check_load(uint64_t nbytes, const char *fmt, ...)
{
    mw_sysmem m;
    if (!mw_sysmem_check_enabled() || mw_sysmem_query(&m) == MW_SYSMEM_NONE)
        return MW_OK;
    const uint64_t mine = m.available / (uint64_t)load_share;
    if (nbytes <= mine)
        return MW_OK;
    char subject[1024], need[32], av[32], src[512], sh[96] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(subject, sizeof subject, fmt, ap);
    va_end(ap);
    if (load_share > 1)
        snprintf(sh, sizeof sh, "; shared by %d ranks on this node", load_share);
    return mw_err(MW_ENOMEM,
                  "%s %s (%llu bytes) in memory, more than the %s this process may use (%s%s): "
                  "nothing was loaded; MW_MEMORY_CHECK=off skips this check",
                  subject, mw_sysmem_bytes_str(need, sizeof need, nbytes),
                  (unsigned long long)nbytes, mw_sysmem_bytes_str(av, sizeof av, mine),
                  mw_sysmem_describe(&m, src, sizeof src), sh);
}

int mw_sys_cpus(cpu_set_t *set)
{
    cpu_set_t mine;
    CPU_ZERO(&mine);
    int n = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        n = CPU_COUNT(&mine);
    if (n <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)(online < CPU_SETSIZE ? online : CPU_SETSIZE) : 1;
        CPU_ZERO(&mine);
        for (int i = 0; i < n; i++)
            CPU_SET(i, &mine);
    }
    if (set)
        *set = mine;
    return n;
}
