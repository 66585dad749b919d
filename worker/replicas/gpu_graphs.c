/* The GPU backend's CUDA graphs: the cache of captured micro-batch shapes (gpu_graphs.h). */
#include "worker/replicas/gpu_graphs.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/runtime.h"

/* g's entry for key, or NULL. */
static mw_graph_entry *find(mw_graph_cache *g, const void *key, size_t len)
{
    for (int i = 0; i < MW_GRAPHS; i++)
        if (g->e[i].len == len && memcmp(g->e[i].key, key, len) == 0)
            return &g->e[i];
    return NULL;
}

/* A free entry, or the least recently used one emptied. */
static mw_graph_entry *take(mw_graph_cache *g)
{
    mw_graph_entry *v = &g->e[0];
    for (int i = 0; i < MW_GRAPHS; i++) {
        if (g->e[i].len == 0)
            return &g->e[i];
        if (g->e[i].used < v->used)
            v = &g->e[i];
    }
    mw_cuda_graph_free(v->exec);
    memset(v, 0, sizeof *v);
    return v;
}

mw_status mw_graph_run(mw_graph_cache *g, const mw_kctx *k, const void *key, size_t len,
                       void (*body)(void *arg), void *arg)
{
    if (len == 0 || len > MW_GRAPH_KEY_MAX)
        return mw_err(MW_EINTERNAL, "CUDA graph key of %zu bytes (1 to %d)", len, MW_GRAPH_KEY_MAX);
    if (mw_cuda_last_status(k) != MW_OK) { /* a failed device: its kernels do nothing */
        body(arg);
        return mw_cuda_last_status(k);
    }
    mw_graph_entry *e = g->on ? find(g, key, len) : NULL;
    if (g->on && !e) { /* first sight: one by one, its heuristics and caches filled */
        e = take(g);
        memcpy(e->key, key, len);
        e->len = len;
    } else if (e && !e->captured) { /* second: captured, then launched */
        char why[512];
        void *exec = NULL;
        const int had_msg = mw_err_msg()[0] != '\0';
        mw_status rc = mw_cuda_capture_begin(k);
        if (rc == MW_OK) {
            body(arg);
            rc = mw_cuda_capture_end(k, &exec, why, sizeof why);
        } else {
            snprintf(why, sizeof why, "%s", mw_err_msg());
            if (!had_msg)
                mw_err_clear();
        }
        if (rc != MW_OK) {
            mw_log_info("CUDA device %d: CUDA graphs off (%s); its kernels are launched one by "
                        "one",
                        g->device, why);
            mw_graph_cache_clear(g);
            g->on = 0;
            e = NULL;
        } else {
            e->exec = exec;
            e->captured = 1;
            g->captures++;
        }
    }
    if (e)
        e->used = ++g->clock;
    if (e && e->captured) {
        g->launches++;
        return mw_cuda_graph_launch(k, e->exec);
    }
    g->eager++;
    body(arg);
    return MW_OK;
}

void mw_graph_cache_clear(mw_graph_cache *g)
{
    for (int i = 0; i < MW_GRAPHS; i++)
        mw_cuda_graph_free(g->e[i].exec);
    memset(g->e, 0, sizeof g->e);
}
