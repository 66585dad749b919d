/* UpSampling2D's source rule, written once for the reference and the CUDA twin
 * ({ref,cuda}/upsample.*): which input rows (or columns) an output row reads, and with what
 * weight. Private to kernels/; under nvcc the function is host and device code. */
#ifndef MW_KERNELS_UPSAMPLE_RULES_H
#define MW_KERNELS_UPSAMPLE_RULES_H

#include <math.h>

#ifdef __CUDACC__
#define MW_UPSAMPLE_HD __host__ __device__ static inline
#else
#define MW_UPSAMPLE_HD static inline
#endif

/* Output row o of an in -> in * s upsampling: its two source rows *i0, *i1 and the second's
 * weight *f. Nearest: row o / s twice, f = 0. Bilinear: the half-pixel centre (o + 0.5) / s - 0.5,
 * clamped to the image. */
MW_UPSAMPLE_HD void mw_upsample_src(int o, int in, int s, int bilinear, int *i0, int *i1, float *f)
{
    if (!bilinear) {
        *i0 = *i1 = o / s, *f = 0.0f;
        return;
    }
    double src = (o + 0.5) / s - 0.5;
    if (src < 0.0)
        src = 0.0;
    const int lo = (int)floor(src);
    *i0 = lo < in - 1 ? lo : in - 1;
    *i1 = lo + 1 < in - 1 ? lo + 1 : in - 1;
    *f = (float)(src - lo);
}

#endif
