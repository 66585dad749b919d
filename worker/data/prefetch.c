/* The decoding pool and its cache (see prefetch.h). One lock guards the slots' states; pixels are
 * written by the one thread that moved a slot to BUSY and read once it is READY, outside the
 * lock: a slot is only dropped by a hint, and hints never overlap takes. */
#include "worker/data/prefetch.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timer.h"
#include "worker/data/stream.h"

enum { FREE, QUEUED, BUSY, READY, FAILED };

typedef struct {
    uint32_t id;
    uint64_t gen; /* the hint that last asked for it */
    int state;
    float *px; /* raw 0..255 */
} slot;

struct mw_prefetch {
    mw_stream *s;
    size_t count; /* floats per example */
    slot *slots;
    uint32_t cap;
    uint32_t *table, mask; /* id -> slot index + 1 (0: empty), open addressing, rebuilt by
                              each hint: a lookup is O(1), not a scan of the cache */
    uint64_t gen;
    double timeout, waited;
    int nthreads, stop;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
};

static uint32_t hash_of(uint32_t id)
{
    return id * 2654435761u;
}

static slot *find(mw_prefetch *p, uint32_t id)
{
    for (uint32_t h = hash_of(id) & p->mask; p->table[h]; h = (h + 1) & p->mask)
        if (p->slots[p->table[h] - 1].id == id)
            return &p->slots[p->table[h] - 1];
    return NULL;
}

static void enter(mw_prefetch *p, uint32_t i)
{
    uint32_t h = hash_of(p->slots[i].id) & p->mask;
    while (p->table[h])
        h = (h + 1) & p->mask;
    p->table[h] = i + 1;
}

/* Decode slot t (BUSY, claimed by this thread) with the lock released, then publish it. */
static void fill(mw_prefetch *p, slot *t)
{
    const uint32_t id = t->id;
    pthread_mutex_unlock(&p->lock);
    const mw_status rc = mw_stream_decode(p->s, t->px, id, 1);
    pthread_mutex_lock(&p->lock);
    t->state = rc == MW_OK ? READY : FAILED;
    pthread_cond_broadcast(&p->done);
}

/* The oldest hint's first queued slot, or NULL. */
static slot *next_job(mw_prefetch *p)
{
    slot *best = NULL;
    for (uint32_t i = 0; i < p->cap; i++) {
        slot *t = &p->slots[i];
        if (t->state == QUEUED && (!best || t->gen < best->gen))
            best = t;
    }
    return best;
}

static void *worker(void *arg)
{
    mw_prefetch *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        slot *t = next_job(p);
        if (!t) {
            pthread_cond_wait(&p->work, &p->lock);
            continue;
        }
        t->state = BUSY;
        fill(p, t);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

mw_status mw_prefetch_new(mw_prefetch **out, mw_stream *s, int threads, uint32_t capacity,
                          double timeout)
{
    *out = NULL;
    mw_stream_shape sh;
    mw_stream_shape_of(s, &sh);
    mw_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return mw_err(MW_ENOMEM, "out of memory for the decoding cache");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    const size_t count = (size_t)sh.height * sh.width * (size_t)sh.channels;
    p->s = s, p->count = count, p->cap = capacity, p->timeout = timeout;
    for (p->mask = 1; p->mask < 2 * (uint64_t)capacity; p->mask *= 2)
        ;
    p->table = calloc(p->mask, sizeof *p->table);
    p->mask -= 1;
    if (!p->table || !(p->slots = calloc(capacity, sizeof *p->slots)) ||
        !(p->threads = calloc((size_t)threads, sizeof *p->threads))) {
        mw_prefetch_free(p);
        return mw_err(MW_ENOMEM, "out of memory for the decoding cache (%u examples)", capacity);
    }
    for (uint32_t i = 0; i < capacity; i++)
        if (!(p->slots[i].px = malloc(count * sizeof(float)))) {
            mw_prefetch_free(p);
            return mw_err(MW_ENOMEM,
                          "out of memory for the decoding cache: %u examples of %zu floats",
                          capacity, count);
        }
    for (; p->nthreads < threads; p->nthreads++)
        if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) != 0) {
            mw_prefetch_free(p);
            return mw_err(MW_EINTERNAL, "cannot start decoding thread %d of %d", p->nthreads + 1,
                          threads);
        }
    *out = p;
    return MW_OK;
}

void mw_prefetch_free(mw_prefetch *p)
{
    if (!p)
        return;
    if (p->nthreads) {
        pthread_mutex_lock(&p->lock);
        p->stop = 1;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->nthreads; i++)
            pthread_join(p->threads[i], NULL);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    for (uint32_t i = 0; p->slots && i < p->cap; i++)
        free(p->slots[i].px);
    free(p->table);
    free(p->slots);
    free(p->threads);
    free(p);
}

void mw_prefetch_hint(mw_prefetch *p, const uint32_t *ids, uint32_t n)
{
    pthread_mutex_lock(&p->lock);
    const uint64_t g = ++p->gen;
    for (uint32_t i = 0; i < p->cap; i++) { /* keep this hint's and the previous one's */
        slot *t = &p->slots[i];
        if (t->state != FREE && t->state != BUSY && t->gen + 1 < g)
            t->state = FREE;
    }
    memset(p->table, 0, ((size_t)p->mask + 1) * sizeof *p->table);
    for (uint32_t i = 0; i < p->cap; i++)
        if (p->slots[i].state != FREE)
            enter(p, i);
    uint32_t free_at = 0;
    for (uint32_t k = 0; k < n; k++) {
        slot *t = find(p, ids[k]);
        if (t) {
            t->gen = g;
            continue;
        }
        while (free_at < p->cap && p->slots[free_at].state != FREE)
            free_at++;
        if (free_at == p->cap)
            break; /* full: the rest are decoded when taken */
        t = &p->slots[free_at];
        t->id = ids[k], t->gen = g, t->state = QUEUED;
        enter(p, free_at);
    }
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
}

/* Wait (the lock held) until slot t is no longer BUSY, at most the timeout. */
static mw_status wait_for(mw_prefetch *p, slot *t)
{
    const double t0 = mw_now();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    const double end = (double)until.tv_sec + until.tv_nsec * 1e-9 + p->timeout;
    until.tv_sec = (time_t)floor(end);
    until.tv_nsec = (long)((end - floor(end)) * 1e9);
    int rc = 0;
    while (t->state == BUSY && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->done, &p->lock, &until);
    p->waited += mw_now() - t0;
    if (t->state == BUSY)
        return mw_err(MW_ETIMEOUT,
                      "%s: example %u not decoded after %.0f s (a disk that stopped answering?)",
                      mw_stream_source(p->s, mw_stream_source_of(p->s, t->id)), t->id, p->timeout);
    return MW_OK;
}

mw_status mw_prefetch_take(mw_prefetch *p, float *dst, uint32_t id, int raw)
{
    pthread_mutex_lock(&p->lock);
    slot *t = find(p, id);
    if (t && t->state == QUEUED) { /* do it here rather than wait for the pool */
        t->state = BUSY;
        fill(p, t);
    }
    mw_status rc = t ? wait_for(p, t) : MW_OK;
    const int state = t ? t->state : FREE;
    pthread_mutex_unlock(&p->lock);
    if (rc != MW_OK || state == FAILED) {
        memset(dst, 0, p->count * sizeof *dst);
        return rc != MW_OK ? rc : mw_stream_status(p->s);
    }
    if (state != READY)
        return mw_stream_decode(p->s, dst, id, raw);
    if (raw)
        memcpy(dst, t->px, p->count * sizeof *dst);
    else /* one flat loop, so it vectorizes: the same division per value */
#pragma omp simd
        for (size_t j = 0; j < p->count; j++)
            dst[j] = t->px[j] / 255.0f;
    return MW_OK;
}

double mw_prefetch_waited(mw_prefetch *p)
{
    pthread_mutex_lock(&p->lock);
    const double w = p->waited;
    p->waited = 0;
    pthread_mutex_unlock(&p->lock);
    return w;
}
