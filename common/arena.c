/* Flat arena; see arena.h. */
#include "common/arena.h"

#include <stdlib.h>
#include <string.h>

void mw_arena_init(mw_arena *a)
{
    a->data = NULL;
    a->count = 0;
}

size_t mw_arena_reserve(mw_arena *a, size_t count)
{
    size_t off = a->count;
    a->count += (count + MW_ARENA_ALIGN - 1) / MW_ARENA_ALIGN * MW_ARENA_ALIGN;
    return off;
}

void mw_arena_pad_to(mw_arena *a, size_t multiple)
{
    if (multiple > 1)
        a->count = (a->count + multiple - 1) / multiple * multiple;
}

void *mw_alloc_aligned(size_t nbytes)
{
    size_t n = (nbytes + 63) / 64 * 64;
    if (n == 0)
        n = 64;
    void *p = aligned_alloc(64, n);
    if (p)
        memset(p, 0, n);
    return p;
}

mw_status mw_arena_alloc(mw_arena *a)
{
    free(a->data);
    a->data = mw_alloc_aligned(a->count * sizeof(float));
    if (!a->data)
        return mw_err(MW_ENOMEM, "cannot allocate an arena of %zu floats", a->count);
    return MW_OK;
}

void mw_arena_free(mw_arena *a)
{
    free(a->data);
    a->data = NULL;
    a->count = 0;
}
