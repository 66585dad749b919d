/* A flat float arena with aligned views.
 *
 * Parameters, gradients and each optimizer slot live in one arena each, so
 * all-reduce, optimizer updates and checkpoints see one contiguous buffer.
 * Layout is planned first (mw_arena_reserve returns offsets), then the memory
 * is allocated once (mw_arena_alloc); views are data + offset. Every view
 * starts on a 64-byte boundary; padding is zero and stays zero. */
#ifndef MW_COMMON_ARENA_H
#define MW_COMMON_ARENA_H

#include <stddef.h>

#include "common/status.h"

#define MW_ARENA_ALIGN 16 /* floats: 64 bytes */

typedef struct {
    float *data;  /* owned; NULL until mw_arena_alloc */
    size_t count; /* floats in use (with padding) */
} mw_arena;

void mw_arena_init(mw_arena *a);
/* Plan a view of count floats; returns its offset. */
size_t mw_arena_reserve(mw_arena *a, size_t count);
/* Round the planned size up to a multiple of `multiple` floats (>= 1). */
void mw_arena_pad_to(mw_arena *a, size_t multiple);
/* Allocate the planned size, zeroed. */
mw_status mw_arena_alloc(mw_arena *a);
void mw_arena_free(mw_arena *a);

/* Zeroed 64-byte-aligned allocation of nbytes (rounded up); free with free(). */
void *mw_alloc_aligned(size_t nbytes);

#endif
