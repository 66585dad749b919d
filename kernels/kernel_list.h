/* The kernel table's entries, one line each: the single list from which kernels/kernels.h
 * makes each entry's function type (mw_<op>_fn) and its field of mw_kernels, kernels/twins.h
 * the twins' prototypes, the ref, cpu and cuda tables their fills, and the CUDA host stand-in
 * (tests/hostdev.c) its checked wrappers. No include guard: each includer defines
 *
 *   MW_KERNEL(op, fast, params, args, arrays)
 *
 * op      the field name; the twins are mw_<op>_ref, mw_<op>_cpu, mw_<op>_cuda
 * fast    CPU: kernels/cpu has a fast twin that the cpu table puts in place of the reference;
 *         REF: the cpu table keeps the reference
 * params  the parameters after the context (const mw_kctx *k), in parentheses
 * args    the same names, in parentheses, to forward a call
 * arrays  the memory each pointer spans in the backend's memory, in elements of its type:
 *         MW_A(p, count) required, MW_O(p, count) NULL allowed, MW_AIF / MW_OIF (cond, p,
 *         count) only when cond holds (kernels.h makes them of MW_A and MW_O), MW_BYTES(p,
 *         nbytes) for untyped memory, and MW_ASSERT(cond, what) for a condition the arguments
 *         must meet. A host pointer (sumsq's out) is not listed.
 *
 * The contract of every entry is in the comment above its line (kernels/kernels.h has the
 * conventions: layouts, accumulation). The order is mw_kernels' field order. */

/* clang-format off */
/* y (N,OH,OW,O) = conv(x (N,H,W,C), w (KH,KW,C/G,O)) + b (O), in g->G groups. */
MW_KERNEL(conv2d_fwd, CPU,
          (float *y, const float *x, const float *w, const float *b, const mw_conv2d_geom *g,
           int N),
          (y, x, w, b, g, N),
          MW_A(y, (size_t)N * g->OH * g->OW * g->O) MW_A(x, (size_t)N * g->H * g->W * g->C)
          MW_A(w, mw_conv2d_w_count(g)) MW_O(b, g->O)
          MW_ASSERT(g->G >= 1 && g->C % g->G == 0 && g->O % g->G == 0,
                    "groups G dividing the channels C and the filters O"))
/* dx += dconv/dx, dw += ..., db += sum dy. dx may be NULL (first layer). set_dx 1: dx =
 * dconv/dx, its old values not read. */
MW_KERNEL(conv2d_bwd, CPU,
          (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
           const mw_conv2d_geom *g, int N, int set_dx),
          (dx, dw, db, dy, x, w, g, N, set_dx),
          MW_O(dx, (size_t)N * g->H * g->W * g->C) MW_A(dw, mw_conv2d_w_count(g))
          MW_O(db, g->O) MW_A(dy, (size_t)N * g->OH * g->OW * g->O)
          MW_A(x, (size_t)N * g->H * g->W * g->C) MW_A(w, mw_conv2d_w_count(g))
          MW_ASSERT(g->G >= 1 && g->C % g->G == 0 && g->O % g->G == 0,
                    "groups G dividing the channels C and the filters O"))
/* y (N,OH,OW,C) = max over each window; argmax (N,OH,OW,C) keeps the winning input offset
 * within one image (h*W + w)*C + c, for backward. */
MW_KERNEL(maxpool_fwd, CPU,
          (float *y, int32_t *argmax, const float *x, const mw_pool_geom *g, int N),
          (y, argmax, x, g, N),
          MW_A(y, (size_t)N * g->OH * g->OW * g->C) MW_A(argmax, (size_t)N * g->OH * g->OW * g->C)
          MW_A(x, (size_t)N * g->H * g->W * g->C))
/* dx[argmax] += dy. */
MW_KERNEL(maxpool_bwd, CPU,
          (float *dx, const float *dy, const int32_t *argmax, const mw_pool_geom *g, int N),
          (dx, dy, argmax, g, N),
          MW_A(dx, (size_t)N * g->H * g->W * g->C) MW_A(dy, (size_t)N * g->OH * g->OW * g->C)
          MW_A(argmax, (size_t)N * g->OH * g->OW * g->C))
/* Depthwise y (N,OH,OW,O) = conv(x (N,H,W,C), w (KH,KW,C,M)) + b (O), O = C*M: output channel
 * c*M + m is input channel c alone under its own KH x KW filter w[., ., c, m] (dilated by g->DH,
 * g->DW); w is (KH,KW,O) flat. Keras' DepthwiseConv2D, and Conv2D(groups = C). */
MW_KERNEL(dwconv2d_fwd, CPU,
          (float *y, const float *x, const float *w, const float *b, const mw_conv2d_geom *g,
           int N),
          (y, x, w, b, g, N),
          MW_A(y, (size_t)N * g->OH * g->OW * g->O) MW_A(x, (size_t)N * g->H * g->W * g->C)
          MW_A(w, (size_t)g->KH * g->KW * g->O) MW_O(b, g->O)
          MW_ASSERT(g->O % g->C == 0, "O a multiple of C"))
/* dx += d/dx, dw += d/dw, db += sum dy of dwconv2d_fwd. dx and db may be NULL. set_dx 1:
 * dx = d/dx, its old values not read. */
MW_KERNEL(dwconv2d_bwd, CPU,
          (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
           const mw_conv2d_geom *g, int N, int set_dx),
          (dx, dw, db, dy, x, w, g, N, set_dx),
          MW_O(dx, (size_t)N * g->H * g->W * g->C) MW_A(dw, (size_t)g->KH * g->KW * g->O)
          MW_O(db, g->O) MW_A(dy, (size_t)N * g->OH * g->OW * g->O)
          MW_A(x, (size_t)N * g->H * g->W * g->C) MW_A(w, (size_t)g->KH * g->KW * g->O)
          MW_ASSERT(g->O % g->C == 0, "O a multiple of C"))
/* y (N,O) = x (N,I) * w (I,O) + b (O). */
MW_KERNEL(dense_fwd, CPU,
          (float *y, const float *x, const float *w, const float *b, int N, int I, int O),
          (y, x, w, b, N, I, O),
          MW_A(y, (size_t)N * O) MW_A(x, (size_t)N * I) MW_A(w, (size_t)I * O) MW_O(b, O))
/* dx += dy w^T (dx may be NULL), dw += x^T dy, db += sum dy. */
MW_KERNEL(dense_bwd, CPU,
          (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int N,
           int I, int O),
          (dx, dw, db, dy, x, w, N, I, O),
          MW_O(dx, (size_t)N * I) MW_A(dw, (size_t)I * O) MW_O(db, O) MW_A(dy, (size_t)N * O)
          MW_A(x, (size_t)N * I) MW_A(w, (size_t)I * O))
/* A Dense and the activation that reads its output, in one call (worker/model/plan.c's
 * plan_fusion): z (N,O) = x (N,I) w (I,O) + b (O) as dense_fwd, then y = f(z): act_fwd's f
 * (kind, alpha), or with kind MW_ACTK_RELU relux_fwd's ReLU clipped at alpha (INFINITY: none;
 * slope and threshold 0). The values of dense_fwd then that activation's kernel, in both
 * outputs. y may equal z (the ReLU in place: z's values are then not kept). */
MW_KERNEL(dense_act_fwd, CPU,
          (float *y, float *z, const float *x, const float *w, const float *b, int N, int I,
           int O, mw_act_kind kind, float alpha),
          (y, z, x, w, b, N, I, O, kind, alpha),
          MW_A(y, (size_t)N * O) MW_A(z, (size_t)N * O) MW_A(x, (size_t)N * I)
          MW_A(w, (size_t)I * O) MW_O(b, O)
          MW_ASSERT((int)kind >= 0 && (int)kind <= (int)MW_ACTK_RELU,
                    "kind an activation (mw_act_kind) or MW_ACTK_RELU"))
/* y (N,O) = x (N,I) w^T, w (O,I): a Dense whose kernel is another layer's (O,I) table used
 * transposed (a tied embedding's reverse call: logits from the token table). */
MW_KERNEL(dense_t_fwd, CPU,
          (float *y, const float *x, const float *w, int N, int I, int O),
          (y, x, w, N, I, O),
          MW_A(y, (size_t)N * O) MW_A(x, (size_t)N * I) MW_A(w, (size_t)O * I))
/* dx += dy w (dx may be NULL), dw += dy^T x. */
MW_KERNEL(dense_t_bwd, CPU,
          (float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int I,
           int O),
          (dx, dw, dy, x, w, N, I, O),
          MW_O(dx, (size_t)N * I) MW_A(dw, (size_t)O * I) MW_A(dy, (size_t)N * O)
          MW_A(x, (size_t)N * I) MW_A(w, (size_t)O * I))
/* y = max(x, 0); y may equal x. */
MW_KERNEL(relu_fwd, CPU,
          (float *y, const float *x, size_t count),
          (y, x, count),
          MW_A(y, count) MW_A(x, count))
/* dx = dy * (y > 0), from the forward OUTPUT y; dx may equal dy. */
MW_KERNEL(relu_bwd, CPU,
          (float *dx, const float *dy, const float *y, size_t count),
          (dx, dy, y, count),
          MW_A(dx, count) MW_A(dy, count) MW_A(y, count))
/* Keras' ReLU layer in full (kernels/act_rules.h relux_value): a = x > threshold ? x : 0,
 * clipped to max_value (INFINITY: none), y = a - negative_slope * max(threshold - x, 0);
 * max_value, slope and threshold >= 0. y may equal x. */
MW_KERNEL(relux_fwd, CPU,
          (float *y, const float *x, size_t count, float max_value, float slope, float threshold),
          (y, x, count, max_value, slope, threshold),
          MW_A(y, count) MW_A(x, count))
/* dx += dy * f'(x), from the forward INPUT x (relux_slope; jax's slopes, 0 at the kinks but
 * leaky_relu's 1 at 0); set_dx 1: dx = dy * f'(x), dx's old values not read. With set_dx, dx may
 * equal dy (the ReLU in place: slope and threshold 0, x then its output, whose mask is the
 * input's). */
MW_KERNEL(relux_bwd, CPU,
          (float *dx, const float *dy, const float *x, size_t count, float max_value, float slope,
           float threshold, int set_dx),
          (dx, dy, x, count, max_value, slope, threshold, set_dx),
          MW_A(dx, count) MW_A(dy, count) MW_A(x, count))
/* Keras' Rescaling as a layer: y = x * r->scale[c] + r->offset[c], c = i % r->C (y may equal x;
 * r on the host). */
MW_KERNEL(rescale_fwd, REF,
          (float *y, const float *x, size_t count, const mw_rescale *r),
          (y, x, count, r),
          MW_A(y, count) MW_A(x, count)
          MW_ASSERT(r->C >= 1 && r->C <= MW_RESCALE_MAX_C && count % (size_t)r->C == 0,
                    "1 to MW_RESCALE_MAX_C channels dividing count"))
/* dx += dy * r->scale[c]. */
MW_KERNEL(rescale_bwd, REF,
          (float *dx, const float *dy, size_t count, const mw_rescale *r),
          (dx, dy, count, r),
          MW_A(dx, count) MW_A(dy, count)
          MW_ASSERT(r->C >= 1 && r->C <= MW_RESCALE_MAX_C && count % (size_t)r->C == 0,
                    "1 to MW_RESCALE_MAX_C channels dividing count"))
/* Keras' Normalization over the last axis of (rows, C), its statistics fixed (adapted):
 * y = (x - mean[c]) / max(sqrt(var[c]), eps) in float, as Keras divides. */
MW_KERNEL(normalize_fwd, REF,
          (float *y, const float *x, const float *mean, const float *var, size_t rows, int C,
           float eps),
          (y, x, mean, var, rows, C, eps),
          MW_A(y, rows * C) MW_A(x, rows * C) MW_A(mean, C) MW_A(var, C))
/* dx += dy / max(sqrt(var[c]), eps) (the statistics are constants). */
MW_KERNEL(normalize_bwd, REF,
          (float *dx, const float *dy, const float *var, size_t rows, int C, float eps),
          (dx, dy, var, rows, C, eps),
          MW_A(dx, rows * C) MW_A(dy, rows * C) MW_A(var, C))
/* Sparse softmax cross-entropy from logits (N,K): prob = softmax(logits),
 * loss[i] = -log prob[i][label[i]], computed stably (log-sum-exp). A label outside [0, K) (an
 * ignore_class label: the data check every other) has loss 0 and no one-hot term; its
 * sample weight 0 zeroes its gradient. */
MW_KERNEL(xent_fwd, CPU,
          (float *loss, float *prob, const float *logits, const int32_t *labels, int N, int K),
          (loss, prob, logits, labels, N, K),
          MW_A(loss, N) MW_A(prob, (size_t)N * K) MW_A(logits, (size_t)N * K) MW_A(labels, N))
/* dlogits = scale * (prob - onehot(label)) (onehot 0 for a label outside [0, K)). */
MW_KERNEL(xent_bwd, CPU,
          (float *dlogits, const float *prob, const int32_t *labels, float scale, int N, int K),
          (dlogits, prob, labels, scale, N, K),
          MW_A(dlogits, (size_t)N * K) MW_A(prob, (size_t)N * K) MW_A(labels, N))
/* The losses of dense float targets (mw_dloss, kernels/loss_rules.h; the CPU table keeps the
 * reference: a loss is n x K elements once per step): loss[i] from out row i and y row i; prob (N,
 * K): the output as Keras' metrics see it (CCE: softmax(out), the folded softmax; otherwise out as
 * it is). */
MW_KERNEL(dloss_fwd, REF,
          (const mw_dloss *p, float *loss, float *prob, const float *out, const float *y, int N,
           int K),
          (p, loss, prob, out, y, N, K),
          MW_A(loss, N) MW_A(prob, (size_t)N * K) MW_A(out, (size_t)N * K) MW_A(y, (size_t)N * K))
/* dout = scale * d loss[i] / d out (dout may not alias out or prob). */
MW_KERNEL(dloss_bwd, REF,
          (const mw_dloss *p, float *dout, const float *out, const float *prob, const float *y,
           float scale, int N, int K),
          (p, dout, out, prob, y, scale, N, K),
          MW_A(dout, (size_t)N * K) MW_A(out, (size_t)N * K) MW_A(prob, (size_t)N * K)
          MW_A(y, (size_t)N * K))
/* Sample weights: row i of a (n, width) times w[i] (a per-example loss, or its gradient). */
MW_KERNEL(scale_rows, REF,
          (float *a, const float *w, int n, int width),
          (a, w, n, width),
          MW_A(a, (size_t)n * width) MW_A(w, n))
/* out[i] = the mean of in[i P .. i P + P) (a sequence's per-position losses into its
 * example's loss, summed in order in double); out and in do not overlap. */
MW_KERNEL(row_mean, REF,
          (float *out, const float *in, int n, int P),
          (out, in, n, P),
          MW_A(out, n) MW_A(in, (size_t)n * P))
/* Embedding (kernels/embed.h): ids (n, T) token ids held as floats (exact below 2^24),
 * table (V, D), y (n, T, D): y[i, t] = table[ids[i, t]]. An id that is not an integer in
 * [0, V) (the data are checked before: never) gives a zero row. */
MW_KERNEL(embed_fwd, REF,
          (float *y, const float *ids, const float *table, int n, int T, int D, int V),
          (y, ids, table, n, T, D, V),
          MW_A(y, (size_t)n * T *D) MW_A(ids, (size_t)n * T) MW_A(table, (size_t)V * D))
/* gtable[ids[i, t]] += dy[i, t] for every (i, t) (an id outside [0, V): nothing). */
MW_KERNEL(embed_bwd, REF,
          (float *gtable, const float *dy, const float *ids, int n, int T, int D, int V),
          (gtable, dy, ids, n, T, D, V),
          MW_A(gtable, (size_t)V * D) MW_A(dy, (size_t)n * T *D) MW_A(ids, (size_t)n * T))
/* Keras' GlobalAveragePooling1D under a padding mask (Embedding(mask_zero=True): the steps
 * whose id is 0 are padding): x (n, T, D), ids (n, T); y[i] = the sum over the steps of x[i, t]
 * with ids[i, t] != 0, divided by their number (0 of them: 0 / 0, NaN, as Keras). */
MW_KERNEL(masked_mean_fwd, REF,
          (float *y, const float *x, const float *ids, int n, int T, int D),
          (y, x, ids, n, T, D),
          MW_A(y, (size_t)n * D) MW_A(x, (size_t)n * T *D) MW_A(ids, (size_t)n * T))
/* dx[i, t] += dy[i] / count for the unmasked steps (accumulates, as every backward). */
MW_KERNEL(masked_mean_bwd, REF,
          (float *dx, const float *dy, const float *ids, int n, int T, int D),
          (dx, dy, ids, n, T, D),
          MW_A(dx, (size_t)n * T *D) MW_A(dy, (size_t)n * D) MW_A(ids, (size_t)n * T))
/* KerasHub's SinePositionEncoding (kernels/embed.h): y (n, T, D), the same for every example:
 * step t, feature j: sin(t w_j) for even j, cos(t w_j) for odd j, w_j = (1 / max_wavelength)
 * ^ (2 floor(j / 2) / D), each step in float32 as KerasHub computes it. */
MW_KERNEL(sine_pos, REF,
          (float *y, int n, int T, int D, float max_wavelength),
          (y, n, T, D, max_wavelength),
          MW_A(y, (size_t)n * T *D))
/* KerasHub's RotaryEmbedding (kernels/rope_rules.h): x (n, T, D), each row's D features in
 * D / width groups of width (a head's features; the whole D for the layer alone), each group's
 * halves rotated: feature j < width / 2 and j + width / 2 by the angle a = (t + start) w_j,
 * w_j = max_wavelength ^ -(2 j / denom) / scale, as y_j = x_j cos a - x_(j+h) sin a,
 * y_(j+h) = x_(j+h) cos a + x_j sin a, in float32 as KerasHub computes it, or (half 1: bfloat16,
 * 2: float16) with its 16-bit roundings (the cosine and sine, each product and the sum); y may
 * equal x. */
MW_KERNEL(rope_fwd, CPU,
          (float *y, const float *x, int n, int T, int D, int width, int start, int denom,
           float max_wavelength, float scale, int half),
          (y, x, n, T, D, width, start, denom, max_wavelength, scale, half),
          MW_A(y, (size_t)n * T * D) MW_A(x, (size_t)n * T * D)
          MW_ASSERT(width > 0 && width % 2 == 0 && D % width == 0, "width even, dividing D"))
/* dx += the transposed rotation of dy (rope_fwd's angles; under half, its 16-bit steps'
 * gradient). */
MW_KERNEL(rope_bwd, CPU,
          (float *dx, const float *dy, int n, int T, int D, int width, int start, int denom,
           float max_wavelength, float scale, int half),
          (dx, dy, n, T, D, width, start, denom, max_wavelength, scale, half),
          MW_A(dx, (size_t)n * T * D) MW_A(dy, (size_t)n * T * D)
          MW_ASSERT(width > 0 && width % 2 == 0 && D % width == 0, "width even, dividing D"))
/* Keras' LayerNormalization over the last axis (kernels/layernorm_rules.h): for each of rows rows
 * of D values, y = (x - mean) / sqrt(var + eps) * gamma + beta (var the biased variance;
 * gamma, beta NULL: 1, 0); stat (2 x rows) gets each row's mean and 1 / sqrt(var + eps) for
 * the backward. */
MW_KERNEL(layernorm_fwd, CPU,
          (float *y, float *stat, const float *x, const float *gamma, const float *beta, int rows,
           int D, float eps),
          (y, stat, x, gamma, beta, rows, D, eps),
          MW_A(y, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows) MW_A(x, (size_t)rows * D)
          MW_O(gamma, D) MW_O(beta, D))
/* dx += the input's gradient (dx NULL: none); dgamma, dbeta += theirs (NULL: none), from x,
 * stat and dy. */
MW_KERNEL(layernorm_bwd, CPU,
          (float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
           const float *stat, const float *gamma, int rows, int D),
          (dx, dgamma, dbeta, dy, x, stat, gamma, rows, D),
          MW_O(dx, (size_t)rows * D) MW_O(dgamma, D) MW_O(dbeta, D) MW_A(dy, (size_t)rows * D)
          MW_A(x, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows) MW_O(gamma, D))
/* RMS normalization over the last axis (kernels/rmsnorm_rules.h): for each of rows rows of D
 * values, y = (x * r) * (gamma + offset), r = 1 / sqrt(v + eps), v the mean of the squares, or
 * (centered) the biased variance (Keras' LayerNormalization(rms_scaling=True)); offset 1 is
 * Gemma's (1 + scale). stat (2 x rows) gets each row's mean (0 uncentered) and r. */
MW_KERNEL(rmsnorm_fwd, CPU,
          (float *y, float *stat, const float *x, const float *gamma, int rows, int D, float eps,
           int centered, float offset),
          (y, stat, x, gamma, rows, D, eps, centered, offset),
          MW_A(y, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows) MW_A(x, (size_t)rows * D)
          MW_A(gamma, D))
/* dx += the input's gradient (dx NULL: none); dgamma += gamma's (NULL: none), from x, stat and
 * dy. */
MW_KERNEL(rmsnorm_bwd, CPU,
          (float *dx, float *dgamma, const float *dy, const float *x, const float *stat,
           const float *gamma, int rows, int D, float offset),
          (dx, dgamma, dy, x, stat, gamma, rows, D, offset),
          MW_O(dx, (size_t)rows * D) MW_O(dgamma, D) MW_A(dy, (size_t)rows * D)
          MW_A(x, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows) MW_A(gamma, D))
/* A residual Add of two equal tensors fused with the normalization of its sum (the model's
 * execution, worker/model/plan.c: plan_fusion): s = a + b, summed as Add sums (0 + a, then + b), and y the
 * layernorm_fwd of s, in one pass over each row: the same bits as acc, acc, layernorm_fwd. */
MW_KERNEL(add_layernorm_fwd, CPU,
          (float *s, float *y, float *stat, const float *a, const float *b, const float *gamma,
           const float *beta, int rows, int D, float eps),
          (s, y, stat, a, b, gamma, beta, rows, D, eps),
          MW_A(s, (size_t)rows * D) MW_A(y, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows)
          MW_A(a, (size_t)rows * D) MW_A(b, (size_t)rows * D) MW_O(gamma, D) MW_O(beta, D))
/* Its backward: with t = ds + the norm's input gradient (ds, the sum's gradient from its other
 * consumers), da += t and db += t (either NULL: none; da == db allowed), in one pass over each
 * row; dgamma, dbeta as layernorm_bwd's. The same bits as layernorm_bwd into ds, then acc, acc. */
MW_KERNEL(add_layernorm_bwd, CPU,
          (float *da, float *db, float *dgamma, float *dbeta, const float *ds, const float *dy,
           const float *s, const float *stat, const float *gamma, int rows, int D),
          (da, db, dgamma, dbeta, ds, dy, s, stat, gamma, rows, D),
          MW_O(da, (size_t)rows * D) MW_O(db, (size_t)rows * D) MW_O(dgamma, D) MW_O(dbeta, D)
          MW_A(ds, (size_t)rows * D) MW_A(dy, (size_t)rows * D) MW_A(s, (size_t)rows * D)
          MW_A(stat, 2 * (size_t)rows) MW_O(gamma, D))
/* The same fusion for rmsnorm_fwd: s = a + b, y its RMS normalization. */
MW_KERNEL(add_rmsnorm_fwd, CPU,
          (float *s, float *y, float *stat, const float *a, const float *b, const float *gamma,
           int rows, int D, float eps, int centered, float offset),
          (s, y, stat, a, b, gamma, rows, D, eps, centered, offset),
          MW_A(s, (size_t)rows * D) MW_A(y, (size_t)rows * D) MW_A(stat, 2 * (size_t)rows)
          MW_A(a, (size_t)rows * D) MW_A(b, (size_t)rows * D) MW_A(gamma, D))
/* And for rmsnorm_bwd: t = ds + the input gradient, da += t, db += t; dgamma as rmsnorm_bwd's. */
MW_KERNEL(add_rmsnorm_bwd, CPU,
          (float *da, float *db, float *dgamma, const float *ds, const float *dy, const float *s,
           const float *stat, const float *gamma, int rows, int D, float offset),
          (da, db, dgamma, ds, dy, s, stat, gamma, rows, D, offset),
          MW_O(da, (size_t)rows * D) MW_O(db, (size_t)rows * D) MW_O(dgamma, D)
          MW_A(ds, (size_t)rows * D) MW_A(dy, (size_t)rows * D) MW_A(s, (size_t)rows * D)
          MW_A(stat, 2 * (size_t)rows) MW_A(gamma, D))
/* Keras' GroupNormalization (kernels/groupnorm_rules.h): n examples of S positions of C
 * channels, G groups of C / G channels; each example's group normalized over its S C / G
 * values, y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c] (gamma, beta NULL: 1, 0);
 * stat (2 n G) gets each group's mean, then each group's 1 / sqrt(var + eps). */
MW_KERNEL(groupnorm_fwd, REF,
          (float *y, float *stat, const float *x, const float *gamma, const float *beta, int n,
           int S, int C, int G, float eps),
          (y, stat, x, gamma, beta, n, S, C, G, eps),
          MW_A(y, (size_t)n * S * C) MW_A(stat, 2 * (size_t)n * G) MW_A(x, (size_t)n * S * C)
          MW_O(gamma, C) MW_O(beta, C))
/* dx += the input's gradient (dx NULL: none); dgamma, dbeta += theirs (NULL: none). */
MW_KERNEL(groupnorm_bwd, REF,
          (float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
           const float *stat, const float *gamma, int n, int S, int C, int G),
          (dx, dgamma, dbeta, dy, x, stat, gamma, n, S, C, G),
          MW_O(dx, (size_t)n * S * C) MW_O(dgamma, C) MW_O(dbeta, C) MW_A(dy, (size_t)n * S * C)
          MW_A(x, (size_t)n * S * C) MW_A(stat, 2 * (size_t)n * G) MW_O(gamma, C))
/* MultiHeadAttention's core between its projections (mw_attn_geom): p (n, H, T, S) gets the
 * probabilities (kept for the backward), o (n, T, H, dv) the output; kk and v have kv_heads
 * heads (grouped-query attention: each read by H / kv_heads query heads). The reference computes
 * each row by kernels/attention_rules.h; the fast CPU twin multiplies each example's and head's
 * matrices with sgemm, the CUDA twin each head's over a chunk of examples with cuBLAS'
 * strided-batched GEMMs (other sums' order: within float32 rounding of the reference). */
MW_KERNEL(attn_fwd, CPU,
          (float *o, float *p, const float *q, const float *kk, const float *v,
           const mw_attn_geom *g, int n),
          (o, p, q, kk, v, g, n),
          MW_A(o, (size_t)n * g->T * g->H * g->dv) MW_A(p, (size_t)n * g->T * g->H * g->S)
          MW_A(q, (size_t)n * g->T * g->H * g->dk)
          MW_A(kk, (size_t)n * g->S * mw_attn_kvh(g) * g->dk)
          MW_A(v, (size_t)n * g->S * mw_attn_kvh(g) * g->dv) MW_O(g->qids, (size_t)n * g->T)
          MW_O(g->vids, (size_t)n * g->S) MW_OIF(g->rate > 0.0f, g->ids, n)
          MW_ASSERT(g->H % mw_attn_kvh(g) == 0, "kv_heads dividing H"))
/* dq, dk, dv += the gradients (same layouts as q, kk, v) from dout (n, T, H, dv) and the
 * forward's p, which it overwrites (the scores' gradient takes its place); a key or value
 * head's gradient is the sum over the query heads of its group. */
MW_KERNEL(attn_bwd, CPU,
          (float *dq, float *dk, float *dv, float *p, const float *dout, const float *q,
           const float *kk, const float *v, const mw_attn_geom *g, int n),
          (dq, dk, dv, p, dout, q, kk, v, g, n),
          MW_A(dq, (size_t)n * g->T * g->H * g->dk)
          MW_A(dk, (size_t)n * g->S * mw_attn_kvh(g) * g->dk)
          MW_A(dv, (size_t)n * g->S * mw_attn_kvh(g) * g->dv) MW_A(p, (size_t)n * g->T * g->H * g->S)
          MW_A(dout, (size_t)n * g->T * g->H * g->dv) MW_A(q, (size_t)n * g->T * g->H * g->dk)
          MW_A(kk, (size_t)n * g->S * mw_attn_kvh(g) * g->dk)
          MW_A(v, (size_t)n * g->S * mw_attn_kvh(g) * g->dv)
          MW_O(g->qids, (size_t)n * g->T) MW_O(g->vids, (size_t)n * g->S)
          MW_OIF(g->rate > 0.0f, g->ids, n) MW_ASSERT(g->H % mw_attn_kvh(g) == 0, "kv_heads dividing H"))
/* Inverted dropout while training, x and y (N, D): element e of example n is kept when
 * mw_rng_hash(seed, stream, ids[n] * D + e) >> 40 (24 uniform bits) is at least
 * ceil(rate * 2^24), so a mask depends on the example's global id and never on its batch
 * position; mask = kept ? 1 / (1 - rate) : 0 and y = x * mask. ids NULL: example n has id n.
 * y may equal x. 0 <= rate < 1. */
MW_KERNEL(dropout_fwd, CPU,
          (float *y, float *mask, const float *x, const uint32_t *ids, uint64_t seed,
           uint64_t stream, float rate, int N, size_t D),
          (y, mask, x, ids, seed, stream, rate, N, D),
          MW_A(y, (size_t)N * D) MW_A(mask, (size_t)N * D) MW_A(x, (size_t)N * D) MW_O(ids, N))
/* dx = dy * mask, count elements (overwrites; dx may equal dy). */
MW_KERNEL(dropout_bwd, CPU,
          (float *dx, const float *dy, const float *mask, size_t count),
          (dx, dy, mask, count),
          MW_A(dx, count) MW_A(dy, count) MW_A(mask, count))
/* p[0..nbytes) = 0 in the backend's memory (host: memset, on k's threads in the fast CPU path;
 * CUDA: enqueued on k's stream). The model zeroes the gradient buffers it accumulates into with
 * it, and the CPU backend its gradient arenas (ResNet50's: 94 MB). */
MW_KERNEL(zero, CPU,
          (void *p, size_t nbytes),
          (p, nbytes),
          MW_BYTES(p, nbytes))
/* Keras' L1/L2 weight penalty on count weights w, both in the backend's memory:
 *   g[i] += scale (l1 sign(w[i]) + 2 l2 w[i])     (in float; skipped when g is NULL)
 *   *acc += scale (l1 sum |w| + l2 sum w^2)       (the sums in double)
 * acc is ONE double in the backend's memory (device memory on CUDA), so the penalty never
 * needs a synchronization to be added up. The CUDA twin needs 2 x 256 doubles of k's scratch
 * and sums in a fixed order (reproducible); the CPU table keeps the reference (its double sums
 * are sequential). */
MW_KERNEL(regularize, REF,
          (float *g, double *acc, const float *w, size_t count, double l1, double l2, float scale),
          (g, acc, w, count, l1, l2, scale),
          MW_O(g, count) MW_A(acc, 1) MW_A(w, count))
/* BatchNormalization over rows of C channels (rows = N*H*W, kernels/batchnorm.h), training:
 * mean and var (the biased batch variance) per channel, invstd = 1 / sqrt(var + eps),
 * y = (x - mean) * invstd * gamma + beta (gamma NULL: 1, beta NULL: 0). Sums in double. y may
 * not alias x. */
MW_KERNEL(bn_fwd_train, CPU,
          (float *y, float *mean, float *var, float *invstd, const float *x, const float *gamma,
           const float *beta, size_t rows, int C, float eps),
          (y, mean, var, invstd, x, gamma, beta, rows, C, eps),
          MW_A(y, rows * C) MW_A(mean, C) MW_A(var, C) MW_A(invstd, C) MW_A(x, rows * C)
          MW_O(gamma, C) MW_O(beta, C))
/* Inference: the same with the given (moving) mean and variance. */
MW_KERNEL(bn_fwd_infer, CPU,
          (float *y, const float *x, const float *gamma, const float *beta, const float *mean,
           const float *var, size_t rows, int C, float eps),
          (y, x, gamma, beta, mean, var, rows, C, eps),
          MW_A(y, rows * C) MW_A(x, rows * C) MW_O(gamma, C) MW_O(beta, C) MW_A(mean, C)
          MW_A(var, C))
/* Backward of the training forward: dx += ..., dgamma += sum dy xhat, dbeta += sum dy
 * (dgamma / dbeta NULL: skipped; gamma NULL: 1); set_dx 1: dx = ..., its old values not read. */
MW_KERNEL(bn_bwd, CPU,
          (float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
           const float *mean, const float *invstd, const float *gamma, size_t rows, int C,
           int set_dx),
          (dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C, set_dx),
          MW_O(dx, rows * C) MW_O(dgamma, C) MW_O(dbeta, C) MW_A(dy, rows * C) MW_A(x, rows * C)
          MW_A(mean, C) MW_A(invstd, C) MW_O(gamma, C))
/* BatchNormalization fused with the ReLU that reads its output alone (the model's execution,
 * worker/model/plan.c: plan_fusion), max_value M (INFINITY: none): bn_fwd_train, then
 * y = min(max(v, 0), M) over its output v in place, in one pass (relux_fwd with slope and
 * threshold 0). v = (x - mean) * invstd * gamma + beta, each operation rounded to float in that
 * order, which bn_fwd_train's twins all compute. */
MW_KERNEL(bn_relu_fwd_train, CPU,
          (float *y, float *mean, float *var, float *invstd, const float *x, const float *gamma,
           const float *beta, size_t rows, int C, float eps, float max_value),
          (y, mean, var, invstd, x, gamma, beta, rows, C, eps, max_value),
          MW_A(y, rows * C) MW_A(mean, C) MW_A(var, C) MW_A(invstd, C) MW_A(x, rows * C)
          MW_O(gamma, C) MW_O(beta, C))
/* Its backward: bn_bwd of g = (0 < v < M ? dy : 0), with v recomputed from x, mean, invstd, gamma
 * and beta exactly as the forward formed it (so the ReLU's mask needs neither v nor y read);
 * dy is the ReLU's output gradient and is not written. */
MW_KERNEL(bn_relu_bwd, CPU,
          (float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
           const float *mean, const float *invstd, const float *gamma, const float *beta,
           size_t rows, int C, float max_value, int set_dx),
          (dx, dgamma, dbeta, dy, x, mean, invstd, gamma, beta, rows, C, max_value, set_dx),
          MW_O(dx, rows * C) MW_O(dgamma, C) MW_O(dbeta, C) MW_A(dy, rows * C) MW_A(x, rows * C)
          MW_A(mean, C) MW_A(invstd, C) MW_O(gamma, C) MW_O(beta, C))
/* The moving statistics (worker/model/model.h), in the backend's memory, count elements:
 * bn_stats_acc adds a replica's batch statistics into their gradient slots, g[i] += weight * st[i];
 * bn_stats_update folds the all-reduced sums in, p[i] = p[i] * momentum + g[i] * (1 - momentum),
 * and zeroes g[i]. Float products and sums, each rounded on its own (the CUDA twin forbids fma
 * contraction), so the tables agree bitwise; the CPU tables keep the reference (2 C floats per
 * layer and step). */
MW_KERNEL(bn_stats_acc, REF,
          (float *g, const float *st, size_t count, float weight),
          (g, st, count, weight),
          MW_A(g, count) MW_A(st, count))
MW_KERNEL(bn_stats_update, REF,
          (float *p, float *g, size_t count, float momentum),
          (p, g, count, momentum),
          MW_A(p, count) MW_A(g, count))
/* Synchronized BatchNormalization (Keras' synchronized=True): the batch statistics and the
 * backward's two sums are taken over every replica's slice. bn_sums gives this slice's
 * per-channel sums (s: 2 C doubles, overwritten), which the caller sums over the replicas:
 * dy NULL: s[c] = sum x, s[C + c] = sum x^2 (forward); otherwise s[c] = sum dy,
 * s[C + c] = sum dy xhat with xhat = (x - mean) * invstd (backward), which are also this
 * slice's gradients of beta and gamma: dbeta[c] += s[c], dgamma[c] += s[C + c] (either NULL:
 * skipped; both ignored in the forward). */
MW_KERNEL(bn_sums, CPU,
          (double *s, const float *x, const float *dy, const float *mean, const float *invstd,
           float *dgamma, float *dbeta, size_t rows, int C),
          (s, x, dy, mean, invstd, dgamma, dbeta, rows, C),
          MW_A(s, 2 * C) MW_O(x, rows * C) MW_O(dy, rows * C) MW_AIF(dy, mean, C)
          MW_AIF(dy, invstd, C) MW_OIF(dy, dgamma, C) MW_OIF(dy, dbeta, C))
/* The forward from the summed s over M rows in all: mean = s[c] / M, var = max(s[C + c] / M
 * - mean^2, 0) (biased), invstd and y as bn_fwd_train. */
MW_KERNEL(bn_sync_fwd, CPU,
          (float *y, float *mean, float *var, float *invstd, const float *x, const float *gamma,
           const float *beta, const double *s, double M, size_t rows, int C, float eps),
          (y, mean, var, invstd, x, gamma, beta, s, M, rows, C, eps),
          MW_O(y, rows * C) MW_A(mean, C) MW_A(var, C) MW_A(invstd, C) MW_O(x, rows * C)
          MW_O(gamma, C) MW_O(beta, C) MW_A(s, 2 * C))
/* dx += gamma invstd / M (M dy - s[c] - xhat s[C + c]) with the summed backward s over M rows
 * (gamma NULL: 1); dgamma and dbeta are this slice's own (bn_sums). */
MW_KERNEL(bn_sync_bwd, CPU,
          (float *dx, const float *dy, const float *x, const float *mean, const float *invstd,
           const float *gamma, const double *s, double M, size_t rows, int C),
          (dx, dy, x, mean, invstd, gamma, s, M, rows, C),
          MW_O(dx, rows * C) MW_A(dy, rows * C) MW_A(x, rows * C) MW_A(mean, C) MW_A(invstd, C)
          MW_O(gamma, C) MW_A(s, 2 * C))
/* AveragePooling2D: the mean over the window's cells inside the image (padded cells are not
 * counted, as in TensorFlow). */
MW_KERNEL(avgpool_fwd, CPU,
          (float *y, const float *x, const mw_pool_geom *g, int N),
          (y, x, g, N),
          MW_A(y, (size_t)N * g->OH * g->OW * g->C) MW_A(x, (size_t)N * g->H * g->W * g->C))
/* dx += dy / cells. */
MW_KERNEL(avgpool_bwd, CPU,
          (float *dx, const float *dy, const mw_pool_geom *g, int N),
          (dx, dy, g, N),
          MW_A(dx, (size_t)N * g->H * g->W * g->C) MW_A(dy, (size_t)N * g->OH * g->OW * g->C))
/* ZeroPadding2D: y (N, PT+H+PB, PL+W+PR, C) = x padded with zeros. */
MW_KERNEL(pad2d_fwd, CPU,
          (float *y, const float *x, int H, int W, int C, int PT, int PB, int PL, int PR, int N),
          (y, x, H, W, C, PT, PB, PL, PR, N),
          MW_A(y, (size_t)N *(PT + H + PB) * (PL + W + PR) * C) MW_A(x, (size_t)N * H *W * C))
/* dx += the inner part of dy. */
MW_KERNEL(pad2d_bwd, CPU,
          (float *dx, const float *dy, int H, int W, int C, int PT, int PB, int PL, int PR, int N),
          (dx, dy, H, W, C, PT, PB, PL, PR, N),
          MW_A(dx, (size_t)N * H *W * C) MW_A(dy, (size_t)N *(PT + H + PB) * (PL + W + PR) * C))
/* Conv2DTranspose, g as mw_conv2d_tr_geom_init fills it (the Conv2D whose input gradient it
 * is): y (N,H,W,C) = b (C) + the sum over input pixels and taps of x (N,OH,OW,O) times
 * w (KH,KW,C,O), Keras' kernel layout (kernel, kernel, filters, input channels). */
MW_KERNEL(conv2d_tr_fwd, CPU,
          (float *y, const float *x, const float *w, const float *b, const mw_conv2d_geom *g,
           int N),
          (y, x, w, b, g, N),
          MW_A(y, (size_t)N * g->H * g->W * g->C) MW_A(x, (size_t)N * g->OH * g->OW * g->O)
          MW_A(w, (size_t)g->KH * g->KW * g->C * g->O) MW_O(b, g->C))
/* dx += the Conv2D of dy with w (dx NULL: skipped), dw += ..., db += sum dy. */
MW_KERNEL(conv2d_tr_bwd, CPU,
          (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
           const mw_conv2d_geom *g, int N),
          (dx, dw, db, dy, x, w, g, N),
          MW_O(dx, (size_t)N * g->OH * g->OW * g->O) MW_A(dw, (size_t)g->KH * g->KW * g->C * g->O)
          MW_O(db, g->C) MW_A(dy, (size_t)N * g->H * g->W * g->C)
          MW_A(x, (size_t)N * g->OH * g->OW * g->O) MW_A(w, (size_t)g->KH * g->KW * g->C * g->O))
/* UpSampling2D: y (N, H SH, W SW, C) from x (N,H,W,C); bilinear 0: each pixel repeated
 * (nearest), 1: jax.image.resize's bilinear (half-pixel centres, source row (o + 0.5) / SH -
 * 0.5 clamped to [0, H - 1], the two nearest rows weighted linearly; the same on columns).
 * The CPU table keeps the reference (one pass over the output). */
MW_KERNEL(upsample_fwd, REF,
          (float *y, const float *x, int H, int W, int C, int SH, int SW, int bilinear, int N),
          (y, x, H, W, C, SH, SW, bilinear, N),
          MW_A(y, (size_t)N * H * SH * W * SW * C) MW_A(x, (size_t)N * H * W * C))
/* dx += the adjoint: each output pixel's dy spread back with its forward weights. */
MW_KERNEL(upsample_bwd, REF,
          (float *dx, const float *dy, int H, int W, int C, int SH, int SW, int bilinear, int N),
          (dx, dy, H, W, C, SH, SW, bilinear, N),
          MW_A(dx, (size_t)N * H * W * C) MW_A(dy, (size_t)N * H * SH * W * SW * C))
/* y += x (Add, and the gradient of a tensor with several consumers). */
MW_KERNEL(acc, CPU,
          (float *y, const float *x, size_t count),
          (y, x, count),
          MW_A(y, count) MW_A(x, count))
/* y = (0 + a) + b, or y = 0 + a with b NULL, in one pass: the bits of zeroing y then acc(y, a)
 * and acc(y, b) (Add's sum of two inputs; a copy; an Add's gradient written into an input's). */
MW_KERNEL(add2, CPU,
          (float *y, const float *a, const float *b, size_t count),
          (y, a, b, count),
          MW_A(y, count) MW_A(a, count) MW_O(b, count))
/* Multiply: y = a * b. */
MW_KERNEL(mul_fwd, CPU,
          (float *y, const float *a, const float *b, size_t count),
          (y, a, b, count),
          MW_A(y, count) MW_A(a, count) MW_A(b, count))
/* da += dy * b, db += dy * a (either NULL: skipped). */
MW_KERNEL(mul_bwd, CPU,
          (float *da, float *db, const float *dy, const float *a, const float *b, size_t count),
          (da, db, dy, a, b, count),
          MW_O(da, count) MW_O(db, count) MW_A(dy, count) MW_A(a, count) MW_A(b, count))
/* Broadcasting merge (kernels.h: mw_bcast_geom): y = a + b scale (mul 0) or a b scale (mul 1),
 * each operand read at its strides, b NULL standing for ones (a constant operand: x + scale,
 * x scale); y may be a itself when a has y's shape (an Add of several). */
MW_KERNEL(bcast_fwd, REF,
          (float *y, const float *a, const float *b, const mw_bcast_geom *bg, int mul,
           float scale),
          (y, a, b, bg, mul, scale),
          MW_A(y, mw_bcast_count(bg, 0)) MW_A(a, mw_bcast_count(bg, 1))
          MW_O(b, mw_bcast_count(bg, 2)))
/* The gradients of bcast_fwd: da += dy (mul 0) or dy b scale, db += dy scale or dy a scale,
 * each summed over the axes it is broadcast on; da, db NULL: skipped; a is read only when mul
 * and db is wanted, b (NULL: ones) only when mul. */
MW_KERNEL(bcast_bwd, REF,
          (float *da, float *db, const float *dy, const float *a, const float *b,
           const mw_bcast_geom *bg, int mul, float scale),
          (da, db, dy, a, b, bg, mul, scale),
          MW_O(da, mw_bcast_count(bg, 1)) MW_O(db, mw_bcast_count(bg, 2))
          MW_A(dy, mw_bcast_count(bg, 0)) MW_O(a, mw_bcast_count(bg, 1))
          MW_O(b, mw_bcast_count(bg, 2)))
/* Concatenate on the channel axis: y (rows, CY)[:, off:off+CX] = x (rows, CX). */
MW_KERNEL(concat_fwd, CPU,
          (float *y, const float *x, size_t rows, int CX, int CY, int off),
          (y, x, rows, CX, CY, off),
          MW_A(y, rows * CY) MW_A(x, rows * CX)
          MW_ASSERT(off >= 0 && off + CX <= CY, "channels [off, off + CX) outside [0, CY)"))
/* dx += that part of dy. */
MW_KERNEL(concat_bwd, CPU,
          (float *dx, const float *dy, size_t rows, int CX, int CY, int off),
          (dx, dy, rows, CX, CY, off),
          MW_A(dx, rows * CX) MW_A(dy, rows * CY)
          MW_ASSERT(off >= 0 && off + CX <= CY, "channels [off, off + CX) outside [0, CY)"))
/* y = act(x) (the elementwise activations beyond ReLU, mw_act_kind; y may not alias x). */
MW_KERNEL(act_fwd, CPU,
          (float *y, const float *x, size_t count, mw_act_kind kind, float alpha),
          (y, x, count, kind, alpha),
          MW_A(y, count) MW_A(x, count))
/* dx += dy * act'(x), from x and y. */
MW_KERNEL(act_bwd, CPU,
          (float *dx, const float *dy, const float *x, const float *y, size_t count,
           mw_act_kind kind, float alpha),
          (dx, dy, x, y, count, kind, alpha),
          MW_A(dx, count) MW_A(dy, count) MW_A(x, count) MW_A(y, count))
/* Softmax over the last axis of (rows, C), as a layer. */
MW_KERNEL(softmax_fwd, CPU,
          (float *y, const float *x, size_t rows, int C),
          (y, x, rows, C),
          MW_A(y, rows * C) MW_A(x, rows * C))
/* dx += y (dy - sum dy y). */
MW_KERNEL(softmax_bwd, CPU,
          (float *dx, const float *dy, const float *y, size_t rows, int C),
          (dx, dy, y, rows, C),
          MW_A(dx, rows * C) MW_A(dy, rows * C) MW_A(y, rows * C))
/* Keras 3's update rules over count elements, with weight decay and clipping (mw_optim_hyper;
 * the formulas are kernels/optim_rules.h): parameters p, slots s1..s3 (which ones a rule uses
 * is kernels/optim.h; unused ones may be NULL), gradients g (read only). */
#define MW_KERNEL_OPTIM_(op)                                                                       \
    MW_KERNEL(op, CPU,                                                                             \
              (float *p, float *s1, float *s2, float *s3, const float *g, size_t count,            \
               const mw_optim_hyper *h),                                                           \
              (p, s1, s2, s3, g, count, h),                                                        \
              MW_A(p, count) MW_O(s1, count) MW_O(s2, count) MW_O(s3, count) MW_A(g, count))
MW_KERNEL_OPTIM_(sgd_step)
MW_KERNEL_OPTIM_(adam_step)
MW_KERNEL_OPTIM_(rmsprop_step)
MW_KERNEL_OPTIM_(adagrad_step)
MW_KERNEL_OPTIM_(adamax_step)
#undef MW_KERNEL_OPTIM_
/* The squared norm behind clipnorm and global_clipnorm: *out = sum of g[i]^2 in double, in a
 * fixed order (reproducible; sequential on the CPU).
 * out is HOST memory: the CUDA twin waits for its stream. */
MW_KERNEL(sumsq, REF,
          (double *out, const float *g, size_t count),
          (out, g, count),
          MW_A(g, count))
/* Round count floats in place to the nearest bfloat16 value (kernels/cast.h): the casts of
 * mixed_bfloat16. */
MW_KERNEL(round_bf16, CPU,
          (float *p, size_t count),
          (p, count),
          MW_A(p, count))
/* The same to float16 (mixed_float16). */
MW_KERNEL(round_f16, CPU,
          (float *p, size_t count),
          (p, count),
          MW_A(p, count))
/* clang-format on */
