/* Recursive halving-doubling all-reduce (Rabenseifner's, for latency-bound sizes): log2 P
 * exchanges instead of the ring's 2 (P - 1). See allreduce.h for the contract.
 *
 * P ranks, p2 the largest power of 2 <= P, r = P - p2:
 *   fold      ranks 2i and 2i + 1 (i < r): the even one sends its buffer to the odd one,
 *             which adds it and takes part below as rank i; the even one waits; ranks from
 *             2r on take part as rank - r;
 *   halving   for d = p2 / 2, ..., 1: exchange with the partner (rank ^ d) the half of the
 *             current range the other keeps (the lower rank keeps the lower half), and add
 *             the half received; after log2 p2 exchanges a rank holds the sum of its 1/p2;
 *   doubling  for d = 1, ..., p2 / 2: the same exchanges in reverse, copying;
 *   unfold    the odd ranks send the sum back to their even partners.
 * Every addition is own + received with a fixed pairing, so a layout adds in one order. */
#include "cluster/halving.h"

#include <stdlib.h>

#include "cluster/comm.h"

#define TAG 0x4844 /* "HD"; one call at a time per communicator */
#define MAX_LEVELS 31

/* One call's communicator and wait (the step and timeout for messages). */
typedef struct {
    MPI_Comm comm;
    mw_wait_ctx w;
} hd_call;

/* Exchange with peer: send [s, s + sn), receive rn floats into r (peer: a rank of comm). */
static mw_status exchange(const hd_call *c, int peer, const float *s, size_t sn, float *r,
                          size_t rn)
{
    const mw_wait_ctx w = c->w;
    MPI_Request req[2];
    int peers[2] = {peer, peer}, n = 0;
    if (rn)
        MW_MPI(MPI_Irecv(r, (int)rn, MPI_FLOAT, peer, TAG, c->comm, &req[n++]), w.op);
    if (sn)
        MW_MPI(MPI_Isend(s, (int)sn, MPI_FLOAT, peer, TAG, c->comm, &req[n++]), w.op);
    return n ? mw_comm_wait(&w, req, n, peers) : MW_OK;
}

static void add(float *restrict d, const float *restrict s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

void mw_halving_close(mw_halving *h)
{
    free(h->tmp);
    h->tmp = NULL, h->cap = 0;
}

mw_status mw_halving_sum(mw_halving *h, MPI_Comm comm, float *buf, size_t count, long step,
                         double timeout)
{
    int P, me;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &me);
    const hd_call call = {comm, {"halving-doubling all-reduce", step, timeout}}, *c = &call;
    if (P <= 1 || count == 0)
        return MW_OK;
    int p2 = 1, levels = 0;
    while (p2 * 2 <= P)
        p2 *= 2, levels++;
    const int extra = P - p2;
    if (h->cap < count) { /* what a rank receives at once: at most the whole buffer */
        float *t = realloc(h->tmp, count * sizeof *t);
        if (!t)
            return mw_err(MW_ENOMEM, "halving-doubling all-reduce: no memory for %zu floats",
                          count);
        h->tmp = t, h->cap = count;
    }
    float *tmp = h->tmp;
    int id = me - extra; /* my rank among the p2 that halve and double; -1: folded away */
    if (me < 2 * extra && me % 2 == 0) {
        MW_TRY(exchange(c, me + 1, buf, count, NULL, 0));
        id = -1;
    } else if (me < 2 * extra) {
        MW_TRY(exchange(c, me - 1, NULL, 0, tmp, count));
        add(buf, tmp, count);
        id = me / 2;
    }
    size_t lo[MAX_LEVELS], hi[MAX_LEVELS];
    if (id >= 0) {
        size_t a = 0, b = count;
        for (int k = 0, d = p2 / 2; d >= 1; d /= 2, k++) {
            const int pid = id ^ d, peer = pid < extra ? 2 * pid + 1 : pid + extra;
            const size_t mid = a + (b - a) / 2;
            lo[k] = a, hi[k] = b;
            if ((id & d) == 0) { /* keep [a, mid) */
                MW_TRY(exchange(c, peer, buf + mid, b - mid, tmp, mid - a));
                add(buf + a, tmp, mid - a);
                b = mid;
            } else { /* keep [mid, b) */
                MW_TRY(exchange(c, peer, buf + a, mid - a, tmp, b - mid));
                add(buf + mid, tmp, b - mid);
                a = mid;
            }
        }
        for (int k = levels - 1, d = 1; d < p2; d *= 2, k--) {
            const int pid = id ^ d, peer = pid < extra ? 2 * pid + 1 : pid + extra;
            const size_t mid = lo[k] + (hi[k] - lo[k]) / 2;
            if ((id & d) == 0) /* I hold [lo, mid): send it, receive [mid, hi) */
                MW_TRY(exchange(c, peer, buf + lo[k], mid - lo[k], buf + mid, hi[k] - mid));
            else
                MW_TRY(exchange(c, peer, buf + mid, hi[k] - mid, buf + lo[k], mid - lo[k]));
        }
    }
    if (me < 2 * extra) /* unfold: the odd rank returns the sum */
        return me % 2 ? exchange(c, me - 1, buf, count, NULL, 0)
                      : exchange(c, me + 1, NULL, 0, buf, count);
    return MW_OK;
}
