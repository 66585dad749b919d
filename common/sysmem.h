/* How much memory this process may still use, from the kernel's own accounting.
 *
 * Under a memory cgroup (a Kubernetes pod, a Slurm job, systemd-run -p MemoryMax=) the
 * kernel kills the process at the cgroup's limit, whatever the machine has free; outside
 * one, /proc/meminfo's MemAvailable says what can be had without swapping. The query
 * takes the tighter of the two:
 *
 *   cgroup v2: the path of the "0::" line of /proc/self/cgroup, under the cgroup2 mount
 *              (from /proc/self/mountinfo, else cgroup_root); memory.max and memory.current
 *              at that cgroup and at each parent up to the mount, the smallest headroom
 *              (max - current) wins; "max" means no limit at that level.
 *   cgroup v1: the same with the memory controller's line and mount (else
 *              cgroup_root/memory), memory.limit_in_bytes and memory.usage_in_bytes; a limit
 *              of 2^60 bytes or more is v1's way of saying none.
 *   otherwise: MemAvailable (MemFree on kernels without it) of MemTotal.
 *
 * A file that is missing or does not parse is skipped (never an error): the query falls
 * back level by level, to /proc/meminfo at the end. Only mw_sysmem_check_load sets the error
 * slot.
 *
 * Readers that inflate or copy a file onto the heap (a compressed .npz or .keras member, an
 * IDX file, CIFAR batches) ask mw_sysmem_check_load first, with the size the file's headers
 * give, so a file that would not fit ends the run with MW_ENOMEM (exit 6, not worth a retry)
 * before anything is inflated, instead of the OOM killer's SIGKILL (137) halfway through. */
#ifndef MW_COMMON_SYSMEM_H
#define MW_COMMON_SYSMEM_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef enum {
    MW_SYSMEM_NONE,      /* nothing could be read: the caller has no bound to check */
    MW_SYSMEM_MEMINFO,   /* /proc/meminfo */
    MW_SYSMEM_CGROUP_V1, /* a cgroup v1 memory controller limit */
    MW_SYSMEM_CGROUP_V2, /* a cgroup v2 memory.max */
} mw_sysmem_source;

typedef struct {
    mw_sysmem_source source; /* which bound is the tightest */
    uint64_t limit;          /* bytes: the cgroup's limit, or MemTotal */
    uint64_t usage;          /* bytes charged under it now (MemTotal - MemAvailable for meminfo) */
    uint64_t available;      /* limit - usage, 0 when the usage is above the limit */
    char cgroup[256];        /* the cgroup whose limit binds, as /proc/self/cgroup names it */
} mw_sysmem;

/* The live system: mw_sysmem_query_at(out, "/proc", "/sys/fs/cgroup"). */
mw_sysmem_source mw_sysmem_query(mw_sysmem *out);
/* The same reading proc_root/self/cgroup, proc_root/self/mountinfo, proc_root/meminfo and
 * the cgroup files (tests point both roots at a fake tree; mount points in a fake mountinfo
 * are used as written). Fills *out and returns out->source. */
mw_sysmem_source mw_sysmem_query_at(mw_sysmem *out, const char *proc_root, const char *cgroup_root);
/* "cgroup v2 memory.max of /kubepods/pod1: limit 1.0 GiB, 12.0 MiB in use" or
 * "/proc/meminfo: MemAvailable 22.9 GiB of MemTotal 23.5 GiB"; returns buf. */
const char *mw_sysmem_describe(const mw_sysmem *m, char *buf, size_t nbytes);
/* nbytes as "512 B", "3.0 KiB", "55.2 MiB", "1.0 GiB", "21.3 TiB" (one decimal above B);
 * returns buf. */
const char *mw_sysmem_bytes_str(char *buf, size_t cap, uint64_t nbytes);

/* ---- a load checked before it is made ---- */

/* The ranks of this node that load the same files at the same time (the session sets it once
 * the cluster is known; 1 until then): each may take its share of what is available. */
void mw_sysmem_set_share(int ranks);
/* 0 when MW_MEMORY_CHECK is "off", "0", "no" or "false" (an escape hatch for systems whose
 * accounting misleads the checks), else 1. */
int mw_sysmem_check_enabled(void);
/* MW_OK when nbytes fit in this process's share of what it may use now (mw_sysmem_query), when
 * the check is off or when nothing could be read; else MW_ENOMEM:
 *   "SUBJECT 627.2 MiB (657696128 bytes) in memory, more than the 437.5 MiB this process may use
 *    (cgroup v2 memory.max of /job: limit 512.0 MiB, 74.5 MiB in use): nothing was loaded;
 *    MW_MEMORY_CHECK=off skips this check"
 * where SUBJECT is fmt's text, naming the file and what takes the memory ("data.npz: its
 * deflated members inflate to"). */
mw_status mw_sysmem_check_load(uint64_t nbytes, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the CPUs this process may run on ---- */

/* Its affinity mask (what a cpuset cgroup, taskset or a launcher's binding leaves it) into
 * *set when set is not NULL, and the number of CPUs in it, at least 1. When the mask cannot be
 * read: the online CPUs (*set then holds CPUs 0..n-1). */
int mw_sys_cpus(cpu_set_t *set);

#endif
