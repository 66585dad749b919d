/* The GPU backend's CUDA graphs (--cuda-graphs on), built into the CUDA module with
 * worker/replicas/replicas_gpu.c.
 *
 * A micro-batch's forward and backward are a few hundred kernel launches whose arguments depend
 * on the shape of the step only: the model, the micro-batch's size, the staging slot its data
 * landed in, training or not, the loss scale and the workspace. The one value that changes every
 * step, dropout's seed, the kernels read from device memory (kernels/cuda/graph.h:
 * mw_cuda_step_seed). So the launches of one such shape are captured once into a graph
 * and each later micro-batch of that shape is one graph launch: the host no longer enqueues
 * kernel by kernel, and the device runs them without the gaps between launches.
 *
 * The caller names the shape as a key of bytes (every value the launches depend on besides
 * device memory's contents) and hands the launches over as a function. The first micro-batch of a
 * key runs its kernels one by one (the first calls of a shape ask cuDNN's and cuBLASLt's
 * heuristics and fill their caches, which a capture must not do); the second is captured and
 * launched; later ones are launched. A device keeps MW_GRAPHS keys, the least recently used
 * one's graph released for a new key. When a capture fails (a call CUDA cannot capture, a
 * wrapper's failure inside it), nothing of it ran: the launches run one by one instead, graphs
 * are off for that device from then on, and one line says why. */
#ifndef MW_WORKER_REPLICAS_GPU_GRAPHS_H
#define MW_WORKER_REPLICAS_GPU_GRAPHS_H

#include <stddef.h>

#include "common/status.h"
#include "kernels/kernels.h"

#define MW_GRAPHS 8         /* keys a device keeps */
#define MW_GRAPH_KEY_MAX 96 /* bytes of a key */

typedef struct {
    unsigned char key[MW_GRAPH_KEY_MAX];
    size_t len;         /* 0: free */
    int captured;       /* 0: seen once, run one by one; 1: exec holds its graph */
    void *exec;         /* the instantiated graph (kernels/cuda/graph.h) */
    unsigned long used; /* the cache's clock at its last use */
} mw_graph_entry;

typedef struct {
    int on;     /* --cuda-graphs on and no capture has failed on this device */
    int device; /* CUDA ordinal, for the messages */
    unsigned long clock;
    long eager, captures, launches; /* micro-batches run each way (tests, the closing line) */
    mw_graph_entry e[MW_GRAPHS];
} mw_graph_cache;

/* Run body(arg), which enqueues a micro-batch's launches on k's compute stream, as g's policy
 * says for key (len bytes, at most MW_GRAPH_KEY_MAX): one by one, or captured then launched, or
 * launched. A failed capture turns g off (one info line) and runs body one by one. Errors:
 * those of the launch and of the one-by-one run are k's (its sticky status, seen at the next
 * wait); MW_EINTERNAL for a key too long. */
mw_status mw_graph_run(mw_graph_cache *g, const mw_kctx *k, const void *key, size_t len,
                       void (*body)(void *arg), void *arg);
/* Release g's graphs (the device idle or abandoned); g stays usable, empty. */
void mw_graph_cache_clear(mw_graph_cache *g);

#endif
