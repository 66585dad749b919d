/* Sum-all-reduce algorithms: ring, hierarchical (shared memory + ring), MPI.
 * See allreduce.h for the contract. */
#include "cluster/allreduce.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/comm.h"
#include "common/timer.h"

#define SEG 32768          /* floats per ring segment (128 KiB) */
#define SMALL_NBYTES 65536 /* auto: below this, MPI_Allreduce */
#define FLAG_STRIDE 16     /* longs: one 128-byte line per barrier flag */

static const char *const algo_names[] = {"auto", "ring", "hierarchical", "mpi"};

const char *mw_ar_algo_name(mw_ar_algo a)
{
    return (unsigned)a < 4 ? algo_names[a] : "?";
}

mw_status mw_ar_algo_parse(const char *s, mw_ar_algo *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, algo_names[i])) {
            *out = (mw_ar_algo)i;
            return MW_OK;
        }
    return mw_err(MW_EINVAL, "--allreduce '%s': expected one of auto, ring, hierarchical, mpi",
                  s);
}

void mw_allreduce_init(mw_allreduce *ar)
{
    memset(ar, 0, sizeof *ar);
    ar->comm = ar->node = ar->cross = MPI_COMM_NULL;
    ar->win = MPI_WIN_NULL;
    ar->step = -1;
}

void mw_allreduce_close(mw_allreduce *ar)
{
    if (ar->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(ar->win);
        MPI_Win_free(&ar->win);
    }
    free(ar->tmp);
    free(ar->slots);
    free(ar->node_peer);
    mw_allreduce_init(ar);
}

float *mw_allreduce_buffer(const mw_allreduce *ar)
{
    return ar->hier_ok ? ar->slot : NULL;
}

/* Chunk c of P over count: as even as possible, the first count % P one longer. */
static void chunk(size_t count, int P, int c, size_t *off, size_t *len)
{
    size_t base = count / P, rem = count % P;
    *off = c * base + ((size_t)c < rem ? (size_t)c : rem);
    *len = base + ((size_t)c < rem ? 1 : 0);
}

/* One ring step: send [sbuf, slen) to right, receive rlen floats from left;
 * with add, the received values are added into rbuf, else stored there.
 * Segments let the adds of early segments overlap later transfers. */
static mw_status ring_step(mw_allreduce *ar, MPI_Comm comm, int left, int right, int left_peer,
                           int right_peer, const float *sbuf, size_t slen, float *rbuf,
                           size_t rlen, int add, const char *op)
{
    mw_wait_ctx w = {op, ar->step, ar->timeout};
    size_t ns = (slen + SEG - 1) / SEG, nr = (rlen + SEG - 1) / SEG;
    MPI_Request sreq[64], rreq[64];
    /* Bound the requests in flight: windows of up to 64 segments. */
    size_t sdone = 0, rdone = 0;
    while (sdone < ns || rdone < nr) {
        size_t sn = ns - sdone < 64 ? ns - sdone : 64, rn = nr - rdone < 64 ? nr - rdone : 64;
        for (size_t j = 0; j < rn; j++) {
            size_t o = (rdone + j) * SEG, n = rlen - o < SEG ? rlen - o : SEG;
            float *dst = add ? ar->tmp + j * SEG : rbuf + o;
            MW_MPI(MPI_Irecv(dst, (int)n, MPI_FLOAT, left, 7, comm, &rreq[j]), op);
        }
        for (size_t j = 0; j < sn; j++) {
            size_t o = (sdone + j) * SEG, n = slen - o < SEG ? slen - o : SEG;
            MW_MPI(MPI_Isend(sbuf + o, (int)n, MPI_FLOAT, right, 7, comm, &sreq[j]), op);
        }
        for (size_t j = 0; j < rn; j++) {
            MW_TRY(mw_comm_wait(&w, &rreq[j], 1, &left_peer));
            if (add) {
                size_t o = (rdone + j) * SEG, n = rlen - o < SEG ? rlen - o : SEG;
                float *restrict d = rbuf + o;
                const float *restrict s = ar->tmp + j * SEG;
                for (size_t i = 0; i < n; i++)
                    d[i] += s[i];
            }
        }
        int peers[64];
        for (size_t j = 0; j < sn; j++)
            peers[j] = right_peer;
        MW_TRY(mw_comm_wait(&w, sreq, (int)sn, peers));
        sdone += sn, rdone += rn;
    }
    return MW_OK;
}

/* Ring all-reduce over comm (rank r of P); peer_of maps comm ranks to the
 * training ranks named in messages (NULL: identity). */
static mw_status ring(mw_allreduce *ar, MPI_Comm comm, int r, int P, const int *peer_of,
                      float *buf, size_t count, const char *op)
{
    if (P <= 1 || count == 0)
        return MW_OK;
    int left = (r - 1 + P) % P, right = (r + 1) % P;
    int lp = peer_of ? peer_of[left] : left, rp = peer_of ? peer_of[right] : right;
    /* reduce-scatter: after P-1 steps rank r holds the sum of chunk (r+1) % P */
    for (int s = 0; s < P - 1; s++) {
        int sc = (r - s + P) % P, rc = (r - s - 1 + P) % P;
        size_t so, sl, ro, rl;
        chunk(count, P, sc, &so, &sl);
        chunk(count, P, rc, &ro, &rl);
        MW_TRY(ring_step(ar, comm, left, right, lp, rp, buf + so, sl, buf + ro, rl, 1, op));
    }
    /* all-gather: pass the finished chunks around */
    for (int s = 0; s < P - 1; s++) {
        int sc = (r + 1 - s + P) % P, rc = (r - s + P) % P;
        size_t so, sl, ro, rl;
        chunk(count, P, sc, &so, &sl);
        chunk(count, P, rc, &ro, &rl);
        MW_TRY(ring_step(ar, comm, left, right, lp, rp, buf + so, sl, buf + ro, rl, 0, op));
    }
    return MW_OK;
}

/* Node barrier on shared counters: lets the waiting rank name the late one. */
static mw_status shm_barrier(mw_allreduce *ar, const char *op)
{
    long e = ++ar->epoch;
    __atomic_store_n(&ar->flags[ar->local_rank * FLAG_STRIDE], e, __ATOMIC_RELEASE);
    double t0 = -1;
    for (int j = 0; j < ar->local_size; j++) {
        for (unsigned long spin = 0;
             __atomic_load_n(&ar->flags[j * FLAG_STRIDE], __ATOMIC_ACQUIRE) < e; spin++) {
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
    return MW_OK;
}

static mw_status hierarchical(mw_allreduce *ar, float *buf, size_t count)
{
    static const char op[] = "hierarchical all-reduce";
    const int L = ar->local_size, l = ar->local_rank;
    float *mine = ar->slot;
    if (buf != mine)
        memcpy(mine, buf, count * sizeof(float));
    MW_TRY(shm_barrier(ar, op)); /* every slot holds its rank's gradients */

    /* reduce-scatter: shard l = slot 0 + slot 1 + ... in local-rank order */
    size_t so, sl;
    chunk(count, L, l, &so, &sl);
    float *dst = mine + so;
    enum { B = 512 };
    for (size_t b = 0; b < sl; b += B) {
        size_t n = sl - b < B ? sl - b : B;
        float acc[B];
        const float *s0 = ar->slots[0] + so + b;
        for (size_t i = 0; i < n; i++)
            acc[i] = s0[i];
        for (int j = 1; j < L; j++) {
            const float *sj = ar->slots[j] + so + b;
            for (size_t i = 0; i < n; i++)
                acc[i] += sj[i];
        }
        memcpy(dst + b, acc, n * sizeof(float));
    }
    /* across nodes: ring among the ranks holding the same shard */
    if (ar->nnodes > 1)
        MW_TRY(ring(ar, ar->cross, ar->node_index, ar->nnodes, ar->node_peer + L, dst, sl,
                    "hierarchical all-reduce (cross-node ring)"));
    MW_TRY(shm_barrier(ar, op)); /* every shard is final */

    /* all-gather: copy the other ranks' shards */
    for (int j = 0; j < L; j++) {
        size_t o, n;
        chunk(count, L, j, &o, &n);
        if (j != l)
            memcpy(buf + o, ar->slots[j] + o, n * sizeof(float));
        else if (buf != mine)
            memcpy(buf + o, dst, n * sizeof(float));
    }
    return shm_barrier(ar, op); /* nobody reads my slot any more: safe to refill */
}

mw_status mw_allreduce_sum_with(mw_allreduce *ar, mw_ar_algo algo, float *buf, size_t count)
{
    if (count > ar->max_count)
        return mw_err(MW_EINTERNAL, "all-reduce of %zu floats: opened for at most %zu", count,
                      ar->max_count);
    if (algo == MW_AR_AUTO) {
        if (ar->hier_ok && ar->local_size > 1)
            algo = MW_AR_HIER;
        else
            algo = count * sizeof(float) >= SMALL_NBYTES ? MW_AR_RING : MW_AR_MPI;
    }
    ar->algo = algo;
    if (algo == MW_AR_HIER && !ar->hier_ok)
        return mw_err(MW_ECONFIG, "--allreduce hierarchical needs the same number of ranks on "
                      "every node, sharing memory within a node; use ring or auto");
    if (ar->size <= 1 || count == 0)
        return MW_OK;
    switch (algo) {
    case MW_AR_RING:
        return ring(ar, ar->comm, ar->rank, ar->size, NULL, buf, count, "ring all-reduce");
    case MW_AR_HIER:
        return hierarchical(ar, buf, count);
    case MW_AR_MPI: {
        mw_wait_ctx w = {"MPI_Allreduce", ar->step, ar->timeout};
        MPI_Request req;
        MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, ar->comm, &req),
               w.op);
        return mw_comm_wait(&w, &req, 1, NULL);
    }
    default:
        return mw_err(MW_EINTERNAL, "all-reduce: unknown algorithm %d", (int)algo);
    }
}

mw_status mw_allreduce_sum(mw_allreduce *ar, float *buf, size_t count)
{
    return mw_allreduce_sum_with(ar, ar->requested, buf, count);
}

/* Can the node communicator use shared memory, with equal node sizes
 * everywhere? Agreed over comm, so every rank decides the same. */
static mw_status setup_shared(mw_allreduce *ar, int *ok)
{
    int local_ok = ar->node != MPI_COMM_NULL && ar->cross != MPI_COMM_NULL;
    if (local_ok) {
        MPI_Comm shm;
        MW_MPI(MPI_Comm_split_type(ar->node, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm),
               "all-reduce set-up");
        int n = 0;
        MPI_Comm_size(shm, &n);
        MPI_Comm_free(&shm);
        local_ok = n == ar->local_size;
    }
    int v[3] = {local_ok, ar->local_size, -ar->local_size}, all[3];
    MW_MPI(MPI_Allreduce(v, all, 3, MPI_INT, MPI_MIN, ar->comm), "all-reduce set-up");
    *ok = all[0] && all[1] == -all[2];
    if (!*ok)
        return MW_OK;

    /* Each rank's segment: a header (local rank 0's holds the barrier
     * flags, one line per local rank), then the slot. */
    size_t header = ((size_t)ar->local_size * FLAG_STRIDE * sizeof(long) + 4095) / 4096 * 4096;
    MPI_Aint bytes = (MPI_Aint)(header + ar->max_count * sizeof(float));
    void *base = NULL;
    MW_MPI(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, ar->node, &base, &ar->win),
           "all-reduce shared window");
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
    MW_MPI(MPI_Barrier(ar->node), "all-reduce set-up");
    MPI_Win_sync(ar->win);
    return MW_OK;
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
    size_t scratch = (size_t)64 * SEG;
    ar->tmp = malloc(scratch * sizeof(float));
    ar->node_peer = calloc((size_t)ar->local_size + ar->nnodes, sizeof(int));
    if (!ar->tmp || !ar->node_peer)
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
    /* Spin while waiting, unless the node has more ranks than cores: then
     * give the core away almost at once, or we spin on the waited-for
     * rank's time slice. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    ar->yield_after = ncpu > 0 && ar->local_size > ncpu ? 8 : 65536;
    mw_comm_set_yield_after(ar->yield_after);
    int ok = 0;
    MW_TRY(setup_shared(ar, &ok));
    ar->hier_ok = ok;
    if (algo == MW_AR_HIER && !ok)
        return mw_err(MW_ECONFIG, "--allreduce hierarchical needs the same number of ranks on "
                      "every node, sharing memory within a node; use ring or auto");
    return MW_OK;
}
