/* The `cuda` suite's shared pieces: the context and kernel table, the skip without a device and
 * the buffer helpers of tests/test_cuda.c, and the determinism cases of tests/cuda_det.c that
 * its main runs. */
#ifndef MW_TESTS_TEST_CUDA_H
#define MW_TESTS_TEST_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "kernels/kernels.h"

extern mw_kctx ctx;     /* the suite's CUDA context; ctx.dev == NULL without a device */
extern mw_kernels cuda; /* the table after mw_kernels_init_cuda */

/* In a test: skip it, the reason printed, without a device. */
#define NEED_DEVICE()                                                                              \
    do {                                                                                           \
        if (!ctx.dev) {                                                                            \
            print_message("skipped: no CUDA device (%s)\n", mw_cuda_version_string());             \
            skip();                                                                                \
        }                                                                                          \
        mw_err_clear();                                                                            \
    } while (0)

/* Host and device buffers of one test, freed together. */
typedef struct {
    void *host[64], *dev[64];
    int nh, nd;
} pool;

/* Fail the test with what and the error's message unless rc is MW_OK. */
void check_rc(mw_status rc, const char *what);
/* Wait for the stream and fail on any recorded error. */
void check_sync(void);
/* Keep host memory p (not NULL) in P. */
void *h_keep(pool *P, void *p);
/* count uniform floats in [lo, hi) from seed. */
float *h_rand(pool *P, size_t count, uint64_t seed, float lo, float hi);
/* Values on a coarse grid: integers in [0, levels) (ties). */
float *h_grid(pool *P, size_t count, uint64_t seed, int levels);
/* A host copy of nbytes of src. */
float *h_copy(pool *P, const void *src, size_t nbytes);
/* A device copy of nbytes of host memory (src NULL: uninitialized). */
void *d_put(pool *P, const void *src, size_t nbytes);
/* Download into a new host buffer, after waiting for every kernel before it. */
void *d_get(pool *P, const void *dev, size_t nbytes);
void pool_free(pool *P);
/* One mw_cuda_metrics_add call against the host's sequential sums (test_cuda.c). */
void metrics_case(const mw_metric_list *ml, int N, int K, uint64_t s);

/* tests/cuda_ew.c */
void test_rescale(void **state);
void test_bn_relu(void **state);

/* tests/cuda_attn.c */
void test_attention(void **state);

/* tests/cuda_graph.c */
void test_graphs(void **state);

/* tests/cuda_det.c */
void test_embed_det(void **state);
void test_norm_params_det(void **state);
void test_metrics_rows(void **state);
void test_det_workspace(void **state);
/* The normalizations' parameter gradients from the device (got_g; got_b, NULL: none) against
 * the reference's (want_g, want_b), both from the starts g0, b0 over rows x D terms of dy, x and
 * the reference's statistics st (rms: RMSNormalization's gamma term, no beta): within the
 * float32 bound of a sum in the device's order (cuda_det.c: colsum_misses). */
void expect_norm_params(const float *got_g, const float *got_b, const float *want_g,
                        const float *want_b, const float *g0, const float *b0, const float *dy,
                        const float *x, const float *st, int rows, int D, int rms);

#endif
