/* The cuDNN convolution choices per shape; see dnn_plan.h. */
#include "kernels/cuda/dnn_plan.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static const char *const pass_names[] = {"forward", "backward-data", "backward-filter"};
_Static_assert(sizeof pass_names / sizeof *pass_names == MW_DNN_PASSES,
               "pass_names: one name per pass (MW_DNN_FWD, MW_DNN_BWD_DATA, MW_DNN_BWD_FILTER)");

static int same_key(const mw_dnn_plan *p, const mw_conv2d_geom *g, int n, int tf32, size_t room)
{
    return p->n == n && p->tf32 == tf32 && p->room == room && !memcmp(&p->g, g, sizeof *g);
}

mw_dnn_plan *mw_dnn_cache_get(mw_dnn_cache *c, const mw_conv2d_geom *g, int n, int tf32,
                              size_t room, int *fresh)
{
    *fresh = 0;
    for (int i = c->count - 1; i >= 0; i--) /* the newest first: a model's layers in turn */
        if (same_key(c->plans[i], g, n, tf32, room))
            return c->plans[i];
    if (c->count == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        mw_dnn_plan **q = realloc(c->plans, (size_t)cap * sizeof *q);
        if (!q)
            return NULL;
        c->plans = q, c->cap = cap;
    }
    mw_dnn_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->g = *g, p->n = n, p->tf32 = tf32, p->room = room;
    c->plans[c->count++] = p;
    *fresh = 1;
    return p;
}

void mw_dnn_cache_free(mw_dnn_cache *c, void (*free_descs)(void *))
{
    for (int i = 0; i < c->count; i++) {
        if (c->plans[i]->descs && free_descs)
            free_descs(c->plans[i]->descs);
        free(c->plans[i]);
    }
    free(c->plans);
    memset(c, 0, sizeof *c);
}

void mw_dnn_plan_key(const mw_dnn_plan *p, char *buf, size_t len)
{
    const mw_conv2d_geom *g = &p->g;
    snprintf(buf, len, "%dx%dx%d -> %dx%dx%d (%dx%d, stride %dx%d), batch %d, %s", g->H, g->W, g->C,
             g->OH, g->OW, g->O, g->KH, g->KW, g->SH, g->SW, p->n, p->tf32 ? "TF32" : "FP32");
}

/* Whether line was logged before in this process (and remember it): the plans of every
 * context of a rank that drives several GPUs say the same, once. */
static int seen_before(const char *line)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t seen[512];
    static int nseen;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *s = line; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    pthread_mutex_lock(&mu);
    int found = 0;
    for (int i = 0; i < nseen && !found; i++)
        found = seen[i] == h;
    if (!found && nseen < (int)(sizeof seen / sizeof *seen))
        seen[nseen++] = h;
    pthread_mutex_unlock(&mu);
    return found;
}

/* "forward algorithm 1 (IMPLICIT_PRECOMP_GEMM, 4 KiB)" or "forward im2col (why)" */
static void describe_pass(const mw_dnn_cache *c, const mw_dnn_plan *p, int pass, char *buf,
                          size_t len)
{
    const mw_dnn_cand *k = mw_dnn_plan_current(p, pass);
    if (!k) {
        snprintf(buf, len, "%s im2col (%s)", pass_names[pass],
                 p->why[pass][0] ? p->why[pass] : "no candidate");
        return;
    }
    const char *name = c->algo_name ? c->algo_name(pass, k->algo) : NULL;
    snprintf(buf, len, "%s algorithm %d (%s%s%zu KiB workspace)", pass_names[pass], k->algo,
             name ? name : "", name ? ", " : "", (k->nbytes + 1023) / 1024);
}

void mw_dnn_plan_made(mw_dnn_cache *c, mw_dnn_plan *p, int device)
{
    c->made++;
    char key[128], what[MW_DNN_PASSES][256], line[1024];
    mw_dnn_plan_key(p, key, sizeof key);
    for (int i = 0; i < MW_DNN_PASSES; i++)
        describe_pass(c, p, i, what[i], sizeof what[i]);
    snprintf(line, sizeof line, "cuDNN conv %s: %s; %s; %s", key, what[0], what[1], what[2]);
    if (!seen_before(line))
        mw_log_info("CUDA device %d: %s", device, line);
}

void mw_dnn_plan_refuse(mw_dnn_plan *p, const char *reason)
{
    for (int i = 0; i < MW_DNN_PASSES; i++) {
        p->ncand[i] = p->at[i] = 0;
        snprintf(p->why[i], sizeof p->why[i], "%s", reason);
    }
}

const mw_dnn_cand *mw_dnn_plan_current(const mw_dnn_plan *p, int pass)
{
    return p->at[pass] < p->ncand[pass] ? &p->cand[pass][p->at[pass]] : NULL;
}

const mw_dnn_cand *mw_dnn_plan_failed(mw_dnn_plan *p, int pass, const char *reason, int device)
{
    char key[128], line[512];
    mw_dnn_plan_key(p, key, sizeof key);
    const int failed = p->cand[pass][p->at[pass]].algo;
    if (p->at[pass] < p->ncand[pass])
        p->at[pass]++;
    const mw_dnn_cand *next = mw_dnn_plan_current(p, pass);
    if (next) {
        snprintf(line, sizeof line,
                 "cuDNN conv %s: %s algorithm %d failed (%s); trying algorithm %d", key,
                 pass_names[pass], failed, reason, next->algo);
    } else {
        snprintf(p->why[pass], sizeof p->why[pass], "algorithm %d failed: %s", failed, reason);
        snprintf(line, sizeof line,
                 "cuDNN conv %s: %s algorithm %d failed (%s), the last candidate; im2col + cuBLAS "
                 "from now on",
                 key, pass_names[pass], failed, reason);
    }
    if (!seen_before(line))
        mw_log_warn("CUDA device %d: %s", device, line);
    return next;
}
