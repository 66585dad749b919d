/* Decoding ahead of training (worker/data/prefetch.c): a pool of threads that decodes the encoded
 * images of a rank's share of the next step while the current one computes, into a cache of
 * decoded examples that batch assembly takes from (docs/data.md, "Streaming").
 *
 * The trainer hints the example ids of each coming step (mw_prefetch_hint, once a step, from one
 * thread, never while a batch is being assembled); the cache keeps the last two hints' examples,
 * so the step being assembled finds its own. mw_prefetch_take (any number of threads at once)
 * copies a decoded example out, waits for one being decoded, decodes a queued one itself rather
 * than wait for the pool, and decodes one that was never hinted (evaluation, the first step)
 * on the spot. The result is the same bits as decoding on the spot: the pool runs the same
 * decoder on the same bytes.
 *
 * Memory: capacity x height x width x channels x 4 bytes of cache (capacity: twice the largest
 * share of a step) and each pool thread's decoding scratch (one image, at most the pixel
 * limit). */
#ifndef MW_WORKER_DATA_PREFETCH_H
#define MW_WORKER_DATA_PREFETCH_H

#include <stdint.h>

#include "common/status.h"

struct mw_stream;
typedef struct mw_prefetch mw_prefetch;

/* A pool of threads (>= 1) decoding examples of s into a cache of capacity examples; a take
 * waits for an example being decoded at most timeout seconds (then MW_ETIMEOUT naming it). */
mw_status mw_prefetch_new(mw_prefetch **out, struct mw_stream *s, int threads, uint32_t capacity,
                          double timeout);
/* Stop the pool (a decode in progress finishes) and free the cache; NULL is fine. */
void mw_prefetch_free(mw_prefetch *p);
/* Queue the n examples ids (the rank's share of a coming step) for the pool; the examples of
 * hints before the previous one are dropped. Never waits for decoding. */
void mw_prefetch_hint(mw_prefetch *p, const uint32_t *ids, uint32_t n);
/* Example id into dst (raw: 0..255, else / 255), as mw_stream_decode gives it. */
mw_status mw_prefetch_take(mw_prefetch *p, float *dst, uint32_t id, int raw);
/* Seconds takes spent waiting for the pool since the last call (input wait), and reset. */
double mw_prefetch_waited(mw_prefetch *p);

#endif
