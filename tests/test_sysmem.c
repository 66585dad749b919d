/* common/sysmem: what the process may use, read from fake /proc and cgroup trees in a temp
 * directory: a cgroup v2 limit, "max", nested limits (the least headroom wins), v1 (and its
 * "unlimited" 2^63), a container's mount root from mountinfo, and every way back to
 * /proc/meminfo (no cgroup line, missing or unparsable limit files, meminfo tighter than the
 * cgroup); nothing readable at all; the byte formatting and the descriptions. And the check a
 * reader makes before it inflates a file (mw_sysmem_check_load) on the live system: what fits
 * passes, 1 EiB is MW_ENOMEM with the size, the limit and its source named, a share of 4 ranks
 * takes a quarter, MW_MEMORY_CHECK=off lets everything through. The CPUs the process may run
 * on (mw_sys_cpus) against the kernel's own list in /proc/self/status, and once pinned to one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/sysmem.h"
#include "tests/util.h"

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)

/* Write text to root/rel, making the directories on the way. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    assert_int_equal(mw_fs_mkdir_p(path, "test directory"), MW_OK);
    free(mw_test_write_file(path, slash + 1, text, strlen(text)));
}

/* 8 GiB available of 16 GiB. */
static void meminfo(const char *root)
{
    put(root, "proc/meminfo",
        "MemTotal:       16777216 kB\nMemFree:         1048576 kB\n"
        "MemAvailable:    8388608 kB\nBuffers:           12345 kB\n");
}

static mw_sysmem_source query(const char *root, mw_sysmem *m)
{
    char proc[4096], cg[4096];
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cg", root);
    return mw_sysmem_query_at(m, proc, cg);
}

static void v2_limit(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup", "0::/mwtrain-test-1\n");
    put(root, "cg/mwtrain-test-1/memory.max", "1073741824\n");
    put(root, "cg/mwtrain-test-1/memory.current", "104857600\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.limit, GIB);
    assert_int_equal(m.usage, 100 * MIB);
    assert_int_equal(m.available, GIB - 100 * MIB);
    assert_string_equal(m.cgroup, "/mwtrain-test-1");
    char buf[512];
    assert_string_equal(mw_sysmem_describe(&m, buf, sizeof buf),
                        "cgroup v2 memory.max of /mwtrain-test-1: limit 1.0 GiB, 100.0 MiB in use");
}

/* The inactive file cache in memory.stat is reclaimable: not counted as in use (v2's
 * inactive_file; v1's hierarchical total_inactive_file, not its own-level inactive_file). */
static void reclaimable_cache(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup", "0::/small\n");
    put(root, "cg/small/memory.max", "134217728\n");
    put(root, "cg/small/memory.current", "125829120\n");
    put(root, "cg/small/memory.stat",
        "anon 20971520\nfile 104857600\nactive_file 10485760\n"
        "inactive_file 94371840\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.usage, 30 * MIB); /* 120 MiB - 90 MiB */
    assert_int_equal(m.available, 98 * MIB);
    put(root, "cg/small/memory.stat", "inactive_file 209715200\n"); /* above the usage */
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.usage, 0);
}

/* The same in v1: the hierarchical total_inactive_file counts, not the level's own line. */
static void reclaimable_cache_v1(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup", "4:memory:/small\n");
    put(root, "cg/memory/small/memory.limit_in_bytes", "134217728\n");
    put(root, "cg/memory/small/memory.usage_in_bytes", "125829120\n");
    put(root, "cg/memory/small/memory.stat",
        "cache 104857600\ninactive_file 1048576\n"
        "total_inactive_file 94371840\n");
    put(root, "cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V1);
    assert_int_equal(m.usage, 30 * MIB);
    assert_int_equal(m.available, 98 * MIB);
}

/* "max" at the process's own cgroup: the parent's limit bounds it; all "max": meminfo. */
static void v2_max(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    put(root, "cg/kubepods/pod1/ctr/memory.max", "max\n");
    put(root, "cg/kubepods/pod1/ctr/memory.current", "5000\n");
    put(root, "cg/kubepods/pod1/memory.max", "max\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
    assert_int_equal(m.available, 8 * GIB);
    assert_int_equal(m.limit, 16 * GIB);
    assert_int_equal(m.usage, 8 * GIB);
    assert_string_equal(m.cgroup, "");

    put(root, "cg/kubepods/memory.max", "2147483648\n");
    put(root, "cg/kubepods/memory.current", "1073741824\n");
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.limit, 2 * GIB);
    assert_int_equal(m.available, GIB);
    assert_string_equal(m.cgroup, "/kubepods");
}

/* Limits at several levels: the one with the least headroom (limit - usage) binds, whether
 * it is the smallest limit or not. */
static void v2_nested(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup", "0::/a/b/c\n");
    put(root, "cg/a/b/c/memory.max", "1073741824\n"); /* 1 GiB, 0.9 GiB free */
    put(root, "cg/a/b/c/memory.current", "107374182\n");
    put(root, "cg/a/b/memory.max", "4294967296\n"); /* 4 GiB, 0.5 GiB free */
    put(root, "cg/a/b/memory.current", "3758096384\n");
    put(root, "cg/a/memory.max", "max\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_string_equal(m.cgroup, "/a/b");
    assert_int_equal(m.limit, 4 * GIB);
    assert_int_equal(m.usage, 3.5 * GIB);
    assert_int_equal(m.available, GIB / 2);

    /* the mount's own directory is a level too (in a cgroup namespace it is the pod's) */
    put(root, "cg/memory.max", "268435456\n"); /* 256 MiB at the mount: tighter */
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_string_equal(m.cgroup, "/");
    assert_int_equal(m.available, 256 * MIB);

    put(root, "cg/memory.max", "max\n");
    put(root, "cg/a/b/c/memory.current", "1073741824\n"); /* at its limit: 0 free */
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_string_equal(m.cgroup, "/a/b/c");
    assert_int_equal(m.available, 0);
    put(root, "cg/a/b/c/memory.current", "2000000000\n"); /* over it (v2 allows a moment) */
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.available, 0);
}

/* v1: the memory controller's line among others, under cg/memory; 2^63 means no limit. */
static void v1(void **state)
{
    const char *root = *state;
    meminfo(root);
    put(root, "proc/self/cgroup",
        "9:name=systemd:/\n5:cpu,cpuacct:/\n4:blkio,memory:/job7/step0\n0::/\n");
    put(root, "cg/memory/job7/step0/memory.limit_in_bytes", "9223372036854771712\n");
    put(root, "cg/memory/job7/step0/memory.usage_in_bytes", "12345678\n");
    put(root, "cg/memory/job7/memory.limit_in_bytes", "536870912\n");
    put(root, "cg/memory/job7/memory.usage_in_bytes", "268435456\n");
    put(root, "cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V1);
    assert_int_equal(m.limit, 512 * MIB);
    assert_int_equal(m.usage, 256 * MIB);
    assert_int_equal(m.available, 256 * MIB);
    assert_string_equal(m.cgroup, "/job7");
    char buf[512];
    assert_string_equal(mw_sysmem_describe(&m, buf, sizeof buf),
                        "cgroup v1 memory.limit_in_bytes of /job7: limit 512.0 MiB, 256.0 MiB in "
                        "use");

    put(root, "cg/memory/job7/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
}

/* A container: /proc/self/cgroup names the host's path, mountinfo says that path is what is
 * mounted (root field), at a mount point with an escaped space. */
static void mountinfo_root(void **state)
{
    const char *root = *state;
    char text[8192];
    meminfo(root);
    put(root, "proc/self/cgroup", "0::/\n11:memory:/docker/abc\n");
    snprintf(text, sizeof text,
             "22 1 0:20 / /sys rw,nosuid - sysfs sysfs rw\n"
             "35 31 0:32 /docker/abc %s/mnt/mem\\040cg rw,relatime shared:9 - cgroup cgroup "
             "rw,memory\n"
             "36 31 0:33 /docker/abc %s/mnt/cpu rw,relatime - cgroup cgroup rw,cpu\n",
             root, root);
    put(root, "proc/self/mountinfo", text);
    put(root, "mnt/mem cg/memory.limit_in_bytes", "2147483648\n");
    put(root, "mnt/mem cg/memory.usage_in_bytes", "1073741824\n");
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V1);
    assert_int_equal(m.limit, 2 * GIB);
    assert_int_equal(m.available, GIB);
    assert_string_equal(m.cgroup, "/docker/abc");
}

/* Every way the cgroup part can fail falls back to /proc/meminfo, never an error. */
static void fallbacks(void **state)
{
    const char *root = *state;
    mw_sysmem m;
    assert_int_equal(query(root, &m), MW_SYSMEM_NONE); /* nothing at all */
    assert_int_equal(m.available, 0);
    char buf[128];
    assert_string_equal(mw_sysmem_describe(&m, buf, sizeof buf), "no memory information");

    meminfo(root); /* no /proc/self/cgroup */
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
    assert_int_equal(m.available, 8 * GIB);
    assert_string_equal(mw_sysmem_describe(&m, buf, sizeof buf),
                        "/proc/meminfo: MemAvailable 8.0 GiB of MemTotal 16.0 GiB");

    put(root, "proc/self/cgroup", "0::/gone\n"); /* no such directory */
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
    const char *bad[] = {"", "\n", "12abc\n", "-5\n", "maximum\n", " 1024\n", "0x400\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put(root, "cg/gone/memory.max", bad[i]);
        if (query(root, &m) != MW_SYSMEM_MEMINFO)
            fail_msg("memory.max \"%s\" was taken as a limit (%llu)", bad[i],
                     (unsigned long long)m.limit);
    }
    put(root, "proc/self/cgroup", "garbage\n\n::\n0:/x\n"); /* unparsable lines */
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);

    /* a limit without a readable usage still bounds (usage 0) */
    put(root, "proc/self/cgroup", "0::/gone\n");
    put(root, "cg/gone/memory.max", "1048576\n");
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2);
    assert_int_equal(m.usage, 0);
    assert_int_equal(m.available, MIB);

    /* the machine has less free than the cgroup allows: meminfo binds */
    put(root, "cg/gone/memory.max", "68719476736\n"); /* 64 GiB */
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
    assert_int_equal(m.available, 8 * GIB);

    /* an old kernel without MemAvailable: MemFree */
    put(root, "proc/meminfo", "MemTotal: 4096 kB\nMemFree: 1024 kB\n");
    assert_int_equal(query(root, &m), MW_SYSMEM_MEMINFO);
    assert_int_equal(m.available, MIB);
    assert_int_equal(m.limit, 4 * MIB);
    put(root, "proc/meminfo", "nothing useful\n");
    assert_int_equal(query(root, &m), MW_SYSMEM_CGROUP_V2); /* the 64 GiB limit alone */
    assert_int_equal(m.limit, 64 * GIB);
}

/* The live system answers something and never crashes. */
static void live(void **state)
{
    (void)state;
    mw_sysmem m;
    mw_sysmem_source s = mw_sysmem_query(&m);
    char buf[512];
    printf("live: %s, %llu bytes available\n", mw_sysmem_describe(&m, buf, sizeof buf),
           (unsigned long long)m.available);
    assert_true(s != MW_SYSMEM_NONE); /* Linux has /proc/meminfo */
    assert_true(m.available <= m.limit);
}

static void check_load(void **state)
{
    (void)state;
    unsetenv("MW_MEMORY_CHECK");
    mw_sysmem m;
    assert_true(mw_sysmem_query(&m) != MW_SYSMEM_NONE);
    mw_err_clear();
    assert_int_equal(mw_sysmem_check_load(4096, "f: takes"), MW_OK);
    const uint64_t eib = UINT64_C(1) << 60;
    expect_err(mw_sysmem_check_load(eib, "%s: x_train.npy inflates to", "d.npz"), MW_ENOMEM,
               "d.npz: x_train.npy inflates to 1.0 EiB (1152921504606846976 bytes) in memory, "
               "more than the ",
               " this process may use (", "): nothing was loaded; MW_MEMORY_CHECK=off skips");
    mw_err_clear();
    /* a share: what fits one rank does not fit each of 4 when it is most of it */
    const uint64_t most = m.available / 4 * 3;
    assert_int_equal(mw_sysmem_check_load(most, "f"), MW_OK);
    mw_sysmem_set_share(4);
    expect_err(mw_sysmem_check_load(most, "f: takes"), MW_ENOMEM,
               "; shared by 4 ranks on this node)");
    mw_err_clear();
    mw_sysmem_set_share(1);
    setenv("MW_MEMORY_CHECK", "off", 1);
    assert_int_equal(mw_sysmem_check_load(eib, "f"), MW_OK);
    assert_int_equal(mw_sysmem_check_enabled(), 0);
    unsetenv("MW_MEMORY_CHECK");
    assert_int_equal(mw_sysmem_check_enabled(), 1);
}

static void bytes_str(void **state)
{
    (void)state;
    const struct {
        uint64_t n;
        const char *want;
    } cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {MIB - 1, "1.0 MiB"},
        {55 * MIB + MIB / 4, "55.2 MiB"},
        {GIB, "1.0 GiB"},
        {GIB - 100 * MIB, "924.0 MiB"},
        {(UINT64_C(213) << 30) / 10, "21.3 GiB"},
        {UINT64_C(3) << 40, "3.0 TiB"},
        {UINT64_MAX, "16.0 EiB"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        assert_string_equal(mw_sysmem_bytes_str(buf, sizeof buf, cases[i].n), cases[i].want);
}

/* Cpus_allowed_list ("0-3,8,10-11") into a set; the number of CPUs in it. */
static int allowed_list(cpu_set_t *set)
{
    size_t nbytes = 0;
    char *text = mw_test_read_file("/proc/self/status", &nbytes);
    assert_non_null(text);
    char *line = strstr(text, "\nCpus_allowed_list:");
    assert_non_null(line);
    char *p = line + strlen("\nCpus_allowed_list:");
    CPU_ZERO(set);
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p < '0' || *p > '9')
            break;
        long a = strtol(p, &p, 10), b = a;
        if (*p == '-')
            b = strtol(p + 1, &p, 10);
        for (long c = a; c <= b; c++, n++)
            CPU_SET((int)c, set);
    }
    free(text);
    return n;
}

static void cpus(void **state)
{
    (void)state;
    cpu_set_t got, want;
    int n = mw_sys_cpus(&got);
    assert_int_equal(n, allowed_list(&want));
    assert_true(CPU_EQUAL(&got, &want));
    assert_int_equal(mw_sys_cpus(NULL), n);

    /* pinned to its last CPU, as taskset -c or a cpuset would leave it */
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &got))
            last = c;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    cpu_set_t pinned;
    int n1 = mw_sys_cpus(&pinned);
    assert_int_equal(sched_setaffinity(0, sizeof got, &got), 0);
    assert_int_equal(n1, 1);
    assert_true(CPU_EQUAL(&pinned, &one));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(v2_limit),
        mw_test_in_tmpdir(v2_max),
        mw_test_in_tmpdir(reclaimable_cache),
        mw_test_in_tmpdir(reclaimable_cache_v1),
        mw_test_in_tmpdir(v2_nested),
        mw_test_in_tmpdir(v1),
        mw_test_in_tmpdir(mountinfo_root),
        mw_test_in_tmpdir(fallbacks),
        cmocka_unit_test(live),
        cmocka_unit_test(bytes_str),
        cmocka_unit_test(check_load),
        cmocka_unit_test(cpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
