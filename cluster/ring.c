/* Ring sum-all-reduce of a host buffer over MPI point-to-point; see ring.h. */
#include "cluster/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/comm.h"

#define SEG 32768  /* floats per message (128 KiB) */
#define WIN 16     /* segments in flight per direction: tmp holds WIN * SEG floats (2 MiB) */
#define TAG 0x4e52 /* "NR"; one ring call at a time per communicator, so one tag is enough */

void mw_ring_init(mw_ring *r)
{
    memset(r, 0, sizeof *r);
    r->comm = MPI_COMM_NULL;
    r->size = 1;
    r->left_peer = r->right_peer = -1;
}

void mw_ring_close(mw_ring *r)
{
    free(r->tmp);
    mw_ring_init(r);
}

/* The part of opening both forms share: the communicator, the neighbours, the scratch. */
static mw_status open_comm(mw_ring *r, MPI_Comm comm, const char *what, double timeout)
{
    mw_ring_init(r);
    r->timeout = timeout;
    if (comm == MPI_COMM_NULL)
        return MW_OK;
    r->comm = comm;
    MW_MPI(MPI_Comm_rank(comm, &r->rank), "ring set-up: MPI_Comm_rank");
    MW_MPI(MPI_Comm_size(comm, &r->size), "ring set-up: MPI_Comm_size");
    if (r->size > 1) {
        r->tmp = malloc((size_t)WIN * SEG * sizeof(float));
        if (!r->tmp)
            return mw_err(MW_ENOMEM, "%s: out of memory for the ring's receive buffer", what);
    }
    return MW_OK;
}

mw_status mw_ring_open(mw_ring *r, MPI_Comm comm, const char *what, double timeout)
{
    MW_TRY(open_comm(r, comm, what, timeout));
    if (comm == MPI_COMM_NULL)
        return MW_OK;
    int left = (r->rank - 1 + r->size) % r->size, right = (r->rank + 1) % r->size;

    /* The neighbours' ranks in MPI_COMM_WORLD, so a timeout names a rank the user knows. */
    MPI_Group g, wg;
    MW_MPI(MPI_Comm_group(comm, &g), "ring set-up: MPI_Comm_group");
    int rc = MPI_Comm_group(MPI_COMM_WORLD, &wg);
    if (rc != MPI_SUCCESS) {
        MPI_Group_free(&g);
        return mw_mpi_err(rc, "ring set-up: MPI_Comm_group");
    }
    int in[2] = {left, right}, out[2] = {-1, -1};
    rc = MPI_Group_translate_ranks(g, 2, in, wg, out);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    if (rc != MPI_SUCCESS)
        return mw_mpi_err(rc, "ring set-up: MPI_Group_translate_ranks");
    r->left_peer = out[0];
    r->right_peer = out[1];
    snprintf(r->recv_op, sizeof r->recv_op, "%s, receiving from node %d", what, left);
    snprintf(r->send_op, sizeof r->send_op, "%s, sending to node %d", what, right);
    return MW_OK;
}

mw_status mw_ring_open_as(mw_ring *r, MPI_Comm comm, const char *op, const int *peer_of,
                          double timeout)
{
    MW_TRY(open_comm(r, comm, op, timeout));
    if (comm == MPI_COMM_NULL)
        return MW_OK;
    int left = (r->rank - 1 + r->size) % r->size, right = (r->rank + 1) % r->size;
    r->left_peer = peer_of ? peer_of[left] : left;
    r->right_peer = peer_of ? peer_of[right] : right;
    snprintf(r->recv_op, sizeof r->recv_op, "%s", op);
    snprintf(r->send_op, sizeof r->send_op, "%s", op);
    return MW_OK;
}

/* Chunk c of P over count: as even as possible, the first count % P one longer. */
static void chunk(size_t count, int P, int c, size_t *off, size_t *len)
{
    size_t base = count / (size_t)P, rem = count % (size_t)P, uc = (size_t)c;
    *off = uc * base + (uc < rem ? uc : rem);
    *len = base + (uc < rem ? 1 : 0);
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* One ring step: send [sbuf, sbuf + slen) to the right, receive rlen floats from the left into
 * rbuf, added to it (add) or stored. Windows of up to WIN segments per direction are in flight;
 * every rank cuts the same chunk lengths, so the windows of neighbours line up. */
static mw_status ring_step(mw_ring *r, long step, const float *sbuf, size_t slen, float *rbuf,
                           size_t rlen, int add)
{
    const int left = (r->rank - 1 + r->size) % r->size, right = (r->rank + 1) % r->size;
    const mw_wait_ctx wr = {r->recv_op, step, r->timeout}, ws = {r->send_op, step, r->timeout};
    const size_t ns = (slen + SEG - 1) / SEG, nr = (rlen + SEG - 1) / SEG;
    MPI_Request sreq[WIN], rreq[WIN];
    int speer[WIN];
    for (size_t sd = 0, rd = 0; sd < ns || rd < nr;) {
        size_t sn = min_size(ns - sd, WIN), rn = min_size(nr - rd, WIN);
        for (size_t j = 0; j < rn; j++) {
            size_t o = (rd + j) * SEG, n = min_size(rlen - o, SEG);
            float *dst = add ? r->tmp + j * SEG : rbuf + o;
            MW_MPI(MPI_Irecv(dst, (int)n, MPI_FLOAT, left, TAG, r->comm, &rreq[j]), wr.op);
        }
        for (size_t j = 0; j < sn; j++) {
            size_t o = (sd + j) * SEG, n = min_size(slen - o, SEG);
            MW_MPI(MPI_Isend(sbuf + o, (int)n, MPI_FLOAT, right, TAG, r->comm, &sreq[j]), ws.op);
            speer[j] = r->right_peer;
        }
        for (size_t j = 0; j < rn; j++) {
            MW_TRY(mw_comm_wait(&wr, &rreq[j], 1, &r->left_peer));
            if (!add)
                continue;
            size_t o = (rd + j) * SEG, n = min_size(rlen - o, SEG);
            float *restrict d = rbuf + o;
            const float *restrict s = r->tmp + j * SEG;
            for (size_t i = 0; i < n; i++)
                d[i] += s[i];
        }
        MW_TRY(mw_comm_wait(&ws, sreq, (int)sn, speer));
        sd += sn;
        rd += rn;
    }
    return MW_OK;
}

void mw_ring_piece(size_t off, size_t count, size_t total, int P, int c, size_t *o, size_t *len)
{
    size_t co, cl;
    chunk(total, P, c, &co, &cl);
    size_t lo = co > off ? co : off, hi = min_size(co + cl, off + count);
    *o = lo < hi ? lo - off : 0;
    *len = lo < hi ? hi - lo : 0;
}

mw_status mw_ring_sum_part(mw_ring *r, float *buf, size_t off, size_t count, size_t total,
                           long step)
{
    const int P = r->size, me = r->rank;
    if (P <= 1 || count == 0)
        return MW_OK;
    /* Reduce-scatter: at step s, send chunk (me - s) and add the left's chunk (me - s - 1);
     * after P - 1 steps this rank holds the full sum of chunk (me + 1) % P. */
    for (int s = 0; s < P - 1; s++) {
        size_t so, sl, ro, rl;
        mw_ring_piece(off, count, total, P, (me - s + P) % P, &so, &sl);
        mw_ring_piece(off, count, total, P, (me - s - 1 + P) % P, &ro, &rl);
        MW_TRY(ring_step(r, step, buf + so, sl, buf + ro, rl, 1));
    }
    /* All-gather: pass the finished chunks on around the ring. */
    for (int s = 0; s < P - 1; s++) {
        size_t so, sl, ro, rl;
        mw_ring_piece(off, count, total, P, (me + 1 - s + P) % P, &so, &sl);
        mw_ring_piece(off, count, total, P, (me - s + P) % P, &ro, &rl);
        MW_TRY(ring_step(r, step, buf + so, sl, buf + ro, rl, 0));
    }
    return MW_OK;
}

mw_status mw_ring_sum(mw_ring *r, float *buf, size_t count, long step)
{
    return mw_ring_sum_part(r, buf, 0, count, count, step);
}
