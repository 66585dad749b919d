/* Sum-all-reduce: the algorithm table (auto, ring, hierarchical, mpi, halving-doubling) and
 * the algorithms it runs: the hierarchical one (shared memory within a node + a ring across
 * nodes) and MPI's own here, the ring, on its own and as the cross-node step, cluster/ring.c's,
 * and halving-doubling cluster/halving.c's. auto picks one of the others per call. See
 * allreduce.h for the contract. */
#include "cluster/allreduce.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/comm.h"
#include "cluster/ring.h"
#include "common/sysmem.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "common/watchdog.h"

#define SMALL_NBYTES 65536 /* auto: below this, MPI_Allreduce */
#define FLAG_STRIDE 16     /* longs: one 128-byte line per barrier flag */

const char *const mw_ar_algo_names[MW_AR_COUNT + 1] = {
    [MW_AR_AUTO] = "auto",
    [MW_AR_RING] = "ring",
    [MW_AR_HIER] = "hierarchical",
    [MW_AR_MPI] = "mpi",
    [MW_AR_HALVING] = "halving-doubling",
};

const char *mw_ar_algo_name(mw_ar_algo a)
{
    return (unsigned)a < MW_AR_COUNT ? mw_ar_algo_names[a] : "?";
}

mw_status mw_ar_algo_parse(const char *s, mw_ar_algo *out)
{
    char list[160] = "";
    for (int i = 0; i < MW_AR_COUNT; i++) {
        if (!strcmp(s, mw_ar_algo_names[i])) {
            *out = (mw_ar_algo)i;
            return MW_OK;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 mw_ar_algo_names[i]);
    }
    return mw_err(MW_EINVAL, "--allreduce '%s': expected one of %s", s, list);
}

void mw_allreduce_init(mw_allreduce *ar)
{
    memset(ar, 0, sizeof *ar);
    ar->comm = ar->node = ar->cross = MPI_COMM_NULL;
    ar->win = MPI_WIN_NULL;
    ar->step = -1;
    mw_ring_init(&ar->ring);
    mw_ring_init(&ar->cross_ring);
}

void mw_allreduce_close(mw_allreduce *ar)
{
    if (ar->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(ar->win);
        mw_watchdog_arm("all-reduce close: MPI_Win_free", ar->timeout);
        MPI_Win_free(&ar->win);
        mw_watchdog_disarm();
    }
    mw_ring_close(&ar->ring);
    mw_ring_close(&ar->cross_ring);
    free(ar->slots);
    free(ar->node_peer);
    mw_halving_close(&ar->halving);
    mw_allreduce_init(ar);
}

float *mw_allreduce_buffer(const mw_allreduce *ar)
{
    return ar->hier_ok ? ar->slot : NULL;
}

/* Node barrier on shared counters: lets the waiting rank name the late one. */
static mw_status shm_barrier(mw_allreduce *ar, const char *op)
{
    long e = ++ar->epoch;
    __atomic_store_n(&ar->flags[ar->local_rank * FLAG_STRIDE], e, __ATOMIC_RELEASE);
    double t0 = -1;
    const double tl0 = mw_timeline_on ? mw_timeline_now() : 0;
    int waited = 0;
    for (int j = 0; j < ar->local_size; j++) {
        for (unsigned long spin = 0;
             __atomic_load_n(&ar->flags[j * FLAG_STRIDE], __ATOMIC_ACQUIRE) < e; spin++) {
            waited = 1;
            /* more ranks than cores: the rank we wait for needs our core */
            if (spin >= ar->yield_after)
                sched_yield();
            if (spin % 1024 != 1023)
                continue;
            double now = mw_now();
            if (t0 < 0)
                t0 = now;
            if (ar->timeout > 0 && now - t0 > ar->timeout) {
                char at[48] = "";
                if (ar->step >= 0)
                    snprintf(at, sizeof at, " at step %ld", ar->step);
                return mw_err(MW_ETIMEOUT,
                              "collective timeout: %s%s waited %.0f s for rank %d (same node, "
                              "local rank %d) (--collective-timeout %.0f); that rank is "
                              "stopped, dead or unreachable",
                              op, at, now - t0, ar->node_peer[j], j, ar->timeout);
            }
        }
    }
    if (waited && mw_timeline_on)
        mw_timeline_span("wait: node barrier", "wait", tl0);
    return MW_OK;
}

/* buf: the off-th float of the buffer; the slots are read at the same offset. */
static mw_status hierarchical(mw_allreduce *ar, float *buf, size_t off, size_t count)
{
    static const char op[] = "hierarchical all-reduce";
    const int L = ar->local_size, l = ar->local_rank;
    float *mine = ar->slot + off;
    MW_TL_BEGIN("all-reduce (intra-node reduce-scatter)", "allreduce");
    if (buf != mine)
        memcpy(mine, buf, count * sizeof(float));
    MW_TRY(shm_barrier(ar, op)); /* every slot holds its rank's gradients */

    /* reduce-scatter: shard l = slot 0 + slot 1 + ... in local-rank order */
    size_t so, sl; /* the whole buffer's shard l, cut to the range */
    mw_ring_piece(off, count, ar->total, L, l, &so, &sl);
    float *dst = mine + so;
    enum { B = 512 };
    for (size_t b = 0; b < sl; b += B) {
        size_t n = sl - b < B ? sl - b : B;
        float acc[B];
        const float *s0 = ar->slots[0] + off + so + b;
        for (size_t i = 0; i < n; i++)
            acc[i] = s0[i];
        for (int j = 1; j < L; j++) {
            const float *sj = ar->slots[j] + off + so + b;
            for (size_t i = 0; i < n; i++)
                acc[i] += sj[i];
        }
        memcpy(dst + b, acc, n * sizeof(float));
    }
    MW_TL_END("all-reduce (intra-node reduce-scatter)", "allreduce");
    /* across nodes: ring among the ranks holding the same shard */
    if (ar->nnodes > 1) {
        MW_TL_BEGIN("all-reduce (inter-node ring)", "allreduce");
        size_t fo, fl; /* the whole shard: the ring across nodes cuts by its chunks */
        mw_ring_piece(0, ar->total, ar->total, L, l, &fo, &fl);
        MW_TRY(mw_ring_sum_part(&ar->cross_ring, dst, off + so - fo, sl, fl, ar->step));
        MW_TL_END("all-reduce (inter-node ring)", "allreduce");
    }
    MW_TL_BEGIN("all-reduce (intra-node all-gather)", "allreduce");
    MW_TRY(shm_barrier(ar, op)); /* every shard is final */

    /* all-gather: copy the other ranks' shards */
    for (int j = 0; j < L; j++) {
        size_t o, n;
        mw_ring_piece(off, count, ar->total, L, j, &o, &n);
        if (j != l)
            memcpy(buf + o, ar->slots[j] + off + o, n * sizeof(float));
        else if (buf != mine)
            memcpy(buf + o, dst, n * sizeof(float));
    }
    mw_status rc = shm_barrier(ar, op); /* nobody reads my slot any more: safe to refill */
    MW_TL_END("all-reduce (intra-node all-gather)", "allreduce");
    return rc;
}

static mw_status run_ring(mw_allreduce *ar, float *buf, size_t off, size_t count)
{
    MW_TL_BEGIN("all-reduce (ring)", "allreduce");
    mw_status rc = mw_ring_sum_part(&ar->ring, buf, off, count, ar->total, ar->step);
    MW_TL_END("all-reduce (ring)", "allreduce");
    return rc;
}

static mw_status run_halving(mw_allreduce *ar, float *buf, size_t off, size_t count)
{
    (void)off;
    MW_TL_BEGIN("all-reduce (halving-doubling)", "allreduce");
    mw_status rc = mw_halving_sum(&ar->halving, ar->comm, buf, count, ar->step, ar->timeout);
    MW_TL_END("all-reduce (halving-doubling)", "allreduce");
    return rc;
}

static mw_status run_mpi(mw_allreduce *ar, float *buf, size_t off, size_t count)
{
    (void)off;
    mw_wait_ctx w = {"MPI_Allreduce", ar->step, ar->timeout};
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, ar->comm, &req), w.op);
    return mw_comm_wait(&w, &req, 1, NULL);
}

/* The algorithm that runs for count floats (auto resolved). */
static mw_ar_algo resolve(const mw_allreduce *ar, mw_ar_algo algo, size_t count)
{
    if (algo != MW_AR_AUTO)
        return algo;
    if (ar->hier_ok && ar->local_size > 1)
        return MW_AR_HIER;
    return count * sizeof(float) >= SMALL_NBYTES ? MW_AR_RING : MW_AR_MPI;
}

int mw_allreduce_cut_exact(const mw_allreduce *ar, size_t total)
{
    if (ar->size <= 2)
        return 1;
    const mw_ar_algo a = resolve(ar, ar->requested, total);
    /* the rings (over the ranks, or across nodes on a shard) cut each range by the whole
     * buffer's chunks (mw_ring_sum_part); a node adds its slots in local-rank order */
    return a == MW_AR_RING || (a == MW_AR_HIER && ar->hier_ok);
}

/* Floats [off, off + count) of a buffer of total floats, with algo resolved for total. */
static mw_status sum_at(mw_allreduce *ar, mw_ar_algo algo, float *buf, size_t off, size_t count,
                        size_t total)
{
    if (off + count > total || total > ar->max_count)
        return mw_err(MW_EINTERNAL,
                      "all-reduce of %zu floats at %zu of %zu: opened for at most %zu", count, off,
                      total, ar->max_count);
    algo = resolve(ar, algo, total);
    ar->algo = algo;
    ar->total = total;
    if (algo == MW_AR_HIER && !ar->hier_ok)
        return mw_err(MW_ECONFIG, "--allreduce hierarchical needs the same number of ranks on "
                                  "every node, sharing memory within a node; use ring or auto");
    if (ar->size <= 1 || count == 0)
        return MW_OK;
    static mw_status (*const run[MW_AR_COUNT])(mw_allreduce *, float *, size_t, size_t) = {
        [MW_AR_RING] = run_ring,
        [MW_AR_HIER] = hierarchical,
        [MW_AR_MPI] = run_mpi,
        [MW_AR_HALVING] = run_halving,
    };
    if ((unsigned)algo >= MW_AR_COUNT || !run[algo])
        return mw_err(MW_EINTERNAL, "all-reduce: unknown algorithm %d", (int)algo);
    return run[algo](ar, buf, off, count);
}

mw_status mw_allreduce_sum_with(mw_allreduce *ar, mw_ar_algo algo, float *buf, size_t count)
{
    return sum_at(ar, algo, buf, 0, count, count);
}

mw_status mw_allreduce_sum(mw_allreduce *ar, float *buf, size_t count)
{
    return sum_at(ar, ar->requested, buf, 0, count, count);
}

mw_status mw_allreduce_sum_at(mw_allreduce *ar, float *buf, size_t off, size_t count, size_t total)
{
    return sum_at(ar, ar->requested, buf, off, count, total);
}

/* The ranks of comm that share this machine's memory, under the watchdog (the call cannot be
 * polled). */
static mw_status split_shared(MPI_Comm comm, double timeout, MPI_Comm *out)
{
    mw_watchdog_arm("all-reduce set-up: MPI_Comm_split_type", timeout);
    int mpi = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, out);
    mw_watchdog_disarm();
    return mpi == MPI_SUCCESS ? MW_OK : mw_mpi_err(mpi, "all-reduce set-up");
}

/* Can the node communicator use shared memory, with equal node sizes
 * everywhere? Agreed over comm, so every rank decides the same. */
static mw_status setup_shared(mw_allreduce *ar, int *ok)
{
    int local_ok = ar->node != MPI_COMM_NULL && ar->cross != MPI_COMM_NULL;
    if (local_ok) {
        MPI_Comm shm;
        MW_TRY(split_shared(ar->node, ar->timeout, &shm));
        int n = 0;
        MPI_Comm_size(shm, &n);
        MPI_Comm_free(&shm);
        local_ok = n == ar->local_size;
    }
    int all[3] = {local_ok, ar->local_size, -ar->local_size};
    mw_wait_ctx w = {"all-reduce set-up", -1, ar->timeout};
    MW_TRY(mw_comm_allreduce(&w, all, 3, MPI_INT, MPI_MIN, ar->comm));
    *ok = all[0] && all[1] == -all[2];
    if (!*ok)
        return MW_OK;

    /* Each rank's segment: a header (local rank 0's holds the barrier
     * flags, one line per local rank), then the slot. */
    size_t header = ((size_t)ar->local_size * FLAG_STRIDE * sizeof(long) + 4095) / 4096 * 4096;
    MPI_Aint bytes = (MPI_Aint)(header + ar->max_count * sizeof(float));
    void *base = NULL;
    mw_watchdog_arm("all-reduce set-up: MPI_Win_allocate_shared", ar->timeout);
    int mpi = MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, ar->node, &base, &ar->win);
    mw_watchdog_disarm();
    if (mpi != MPI_SUCCESS)
        return mw_mpi_err(mpi, "all-reduce shared window");
    MPI_Win_lock_all(MPI_MODE_NOCHECK, ar->win);
    ar->slots = calloc((size_t)ar->local_size, sizeof *ar->slots);
    if (!ar->slots)
        return mw_err(MW_ENOMEM, "all-reduce: out of memory");
    /* Barrier flags live in local rank 0's header: one line per rank. */
    for (int j = 0; j < ar->local_size; j++) {
        MPI_Aint sz;
        int disp;
        void *p;
        MW_MPI(MPI_Win_shared_query(ar->win, j, &sz, &disp, &p), "all-reduce shared window");
        ar->slots[j] = (float *)((char *)p + header);
        if (j == 0)
            ar->flags = (volatile long *)p;
    }
    ar->slot = ar->slots[ar->local_rank];
    if (ar->local_rank == 0)
        memset((void *)ar->flags, 0, header);
    MPI_Win_sync(ar->win);
    MW_TRY(mw_comm_barrier(&w, ar->node));
    MPI_Win_sync(ar->win);
    return MW_OK;
}

/* The training ranks on this machine (sharing its memory: a TF_CONFIG may put two "nodes" on
 * one machine) and the number of CPUs they may run on between them, the union of their
 * affinity masks. */
static mw_status machine_cpus(const mw_allreduce *ar, int *ranks, int *ncpu)
{
    cpu_set_t set;
    *ncpu = mw_sys_cpus(&set);
    *ranks = 1;
    if (ar->size <= 1)
        return MW_OK;
    MPI_Comm host;
    MW_TRY(split_shared(ar->comm, ar->timeout, &host));
    MPI_Comm_size(host, ranks);
    mw_wait_ctx w = {"all-reduce set-up: the machine's CPUs", -1, ar->timeout};
    mw_status st = mw_comm_allreduce(&w, &set, (int)sizeof set, MPI_BYTE, MPI_BOR, host);
    MPI_Comm_free(&host);
    *ncpu = CPU_COUNT(&set);
    return st;
}

mw_status mw_allreduce_open(mw_allreduce *ar, MPI_Comm train, MPI_Comm node, MPI_Comm cross,
                            size_t max_count, mw_ar_algo algo, double timeout)
{
    mw_allreduce_init(ar);
    ar->comm = train, ar->node = node, ar->cross = cross;
    ar->requested = algo;
    ar->timeout = timeout;
    ar->max_count = max_count;
    MPI_Comm_rank(train, &ar->rank);
    MPI_Comm_size(train, &ar->size);
    ar->local_rank = 0, ar->local_size = 1, ar->node_index = ar->rank, ar->nnodes = ar->size;
    if (node != MPI_COMM_NULL) {
        MPI_Comm_rank(node, &ar->local_rank);
        MPI_Comm_size(node, &ar->local_size);
    }
    if (cross != MPI_COMM_NULL) {
        MPI_Comm_rank(cross, &ar->node_index);
        MPI_Comm_size(cross, &ar->nnodes);
    }
    MW_TRY(mw_ring_open_as(&ar->ring, train, "ring all-reduce", NULL, timeout));
    ar->node_peer = calloc((size_t)ar->local_size + ar->nnodes, sizeof(int));
    if (!ar->node_peer)
        return mw_err(MW_ENOMEM, "all-reduce: out of memory");
    /* training ranks of my node's ranks, then of my cross-node ring, for messages */
    MPI_Group tg, g;
    MPI_Comm_group(train, &tg);
    int *ids = calloc((size_t)ar->local_size + ar->nnodes, sizeof(int));
    if (!ids)
        return mw_err(MW_ENOMEM, "all-reduce: out of memory");
    for (int i = 0; i < ar->local_size; i++)
        ids[i] = i;
    for (int i = 0; i < ar->nnodes; i++)
        ids[ar->local_size + i] = i;
    if (node != MPI_COMM_NULL) {
        MPI_Comm_group(node, &g);
        MPI_Group_translate_ranks(g, ar->local_size, ids, tg, ar->node_peer);
        MPI_Group_free(&g);
    }
    if (cross != MPI_COMM_NULL) {
        MPI_Comm_group(cross, &g);
        MPI_Group_translate_ranks(g, ar->nnodes, ids + ar->local_size, tg,
                                  ar->node_peer + ar->local_size);
        MPI_Group_free(&g);
    }
    free(ids);
    MPI_Group_free(&tg);
    /* Spin while waiting, unless the ranks on this machine have fewer CPUs than ranks:
     * then give the CPU away almost at once, or we spin on the waited-for rank's time
     * slice. Their CPUs: the union of their affinity masks (a cpuset cgroup, taskset). */
    int host_ranks = 1, ncpu = 1;
    MW_TRY(machine_cpus(ar, &host_ranks, &ncpu));
    ar->yield_after = host_ranks > ncpu ? 8 : 65536;
    mw_comm_set_yield_after(ar->yield_after);
    int ok = 0;
    MW_TRY(setup_shared(ar, &ok));
    ar->hier_ok = ok;
    /* The cross-node step of the hierarchical path; messages name training ranks. */
    if (ok && ar->nnodes > 1)
        MW_TRY(mw_ring_open_as(&ar->cross_ring, cross, "hierarchical all-reduce (cross-node ring)",
                               ar->node_peer + ar->local_size, timeout));
    if (algo == MW_AR_HIER && !ok)
        return mw_err(MW_ECONFIG, "--allreduce hierarchical needs the same number of ranks on "
                                  "every node, sharing memory within a node; use ring or auto");
    return MW_OK;
}
