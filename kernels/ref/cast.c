/* The reference cast: one value at a time (kernels/cast.h). */
#include "kernels/cast.h"
#include "kernels/twins.h"

void mw_round_bf16_ref(const mw_kctx *k, float *p, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        p[i] = mw_bf16_round(p[i]);
}

void mw_round_f16_ref(const mw_kctx *k, float *p, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        p[i] = mw_f16_round(p[i]);
}
