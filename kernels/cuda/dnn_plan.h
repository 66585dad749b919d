/* The choices of the cuDNN convolutions, made once per shape and kept, and what happens when a
 * choice fails. Policy only, in plain C with no CUDA or cuDNN types: kernels/cuda/cudnn.cu is
 * the mechanism (descriptors, cuDNN's heuristic lists, the calls), and tests/test_dnn_plan.c
 * checks this part on any host.
 *
 * A plan is keyed by everything the choice depends on: the geometry, the batch, the math (FP32,
 * or TF32 with --tf32) and the workspace room. Made once (the mechanism's descriptors, and per
 * pass the candidates cuDNN's heuristics list that are acceptable: deterministic, supported, no
 * FP16 conversion, fitting the room, in cuDNN's order), it answers every later call of that
 * shape without a query. A pass runs its current candidate; when cuDNN refuses it at run time
 * the next one is tried, and after the last the pass belongs to im2col for good. A plan whose
 * set-up failed (a shape cuDNN cannot express, a cuDNN sub-library that does not load) is
 * im2col's from the start. What each plan runs is logged once per process (info), and every
 * fallback once with cuDNN's reason (warning). */
#ifndef MW_KERNELS_CUDA_DNN_PLAN_H
#define MW_KERNELS_CUDA_DNN_PLAN_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MW_DNN_FWD, MW_DNN_BWD_DATA, MW_DNN_BWD_FILTER, MW_DNN_PASSES };
#define MW_DNN_MAX_CANDS 8

/* One acceptable algorithm of a pass: cuDNN's algorithm and math-type numbers, and the
 * workspace it needs. */
typedef struct {
    int algo, math;
    size_t nbytes;
} mw_dnn_cand;

typedef struct {
    mw_conv2d_geom g; /* the key: geometry, batch, math, workspace room (bytes) */
    int n, tf32;
    size_t room;
    void *descs;              /* the mechanism's descriptors (released by its free_descs) */
    int ncand[MW_DNN_PASSES]; /* acceptable candidates, 0..MW_DNN_MAX_CANDS */
    int at[MW_DNN_PASSES];    /* the one to run; == ncand: the pass is im2col's */
    mw_dnn_cand cand[MW_DNN_PASSES][MW_DNN_MAX_CANDS];
    char why[MW_DNN_PASSES][160]; /* why a pass is im2col's (empty while it is cuDNN's) */
} mw_dnn_plan;

typedef struct {
    mw_dnn_plan **plans; /* owned, stable addresses */
    int count, cap;
    long made; /* plans made, i.e. rounds of cuDNN heuristic queries */
    /* the mechanism's name of an algorithm of a pass, for the log (NULL: numbers only) */
    const char *(*algo_name)(int pass, int algo);
} mw_dnn_cache;

/* The plan of this key, or a new zeroed one with the key filled in (*fresh = 1: the caller
 * makes it, then calls mw_dnn_plan_made); NULL when out of memory. */
mw_dnn_plan *mw_dnn_cache_get(mw_dnn_cache *c, const mw_conv2d_geom *g, int n, int tf32,
                              size_t room, int *fresh);
/* Release every plan (free_descs(descs) for each non-NULL descs) and zero c. */
void mw_dnn_cache_free(mw_dnn_cache *c, void (*free_descs)(void *));

/* After the mechanism filled the candidates (or left a pass empty with why set, or all empty
 * with mw_dnn_plan_refuse): count it and log what the plan runs, once per process per key
 * and choice. device numbers the log line. */
void mw_dnn_plan_made(mw_dnn_cache *c, mw_dnn_plan *p, int device);
/* Every pass of p is im2col's, for reason (a shape cuDNN cannot express, a failed query). */
void mw_dnn_plan_refuse(mw_dnn_plan *p, const char *reason);

/* The pass's candidate to run, or NULL when the pass is im2col's. */
const mw_dnn_cand *mw_dnn_plan_current(const mw_dnn_plan *p, int pass);
/* The current candidate of pass was refused by cuDNN for reason: the next one (logged once),
 * or NULL when none is left (the pass is im2col's from now on; logged once). */
const mw_dnn_cand *mw_dnn_plan_failed(mw_dnn_plan *p, int pass, const char *reason, int device);

/* "28x28x1 -> 26x26x32 (3x3, stride 1x1), batch 64, FP32" */
void mw_dnn_plan_key(const mw_dnn_plan *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
