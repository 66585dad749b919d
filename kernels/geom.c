/* Output-shape arithmetic shared by every backend (TensorFlow's padding rules). */
#include "kernels/geom.h"
#include "kernels/kernels.h"

#include <limits.h>

/* TF: valid -> ceil((in - k + 1) / s); same -> ceil(in / s), total padding
 * max((out-1)*s + k - in, 0), the smaller half before. */
static int out_size(int in, int k, int s, int same, int *pad_before)
{
    int out;
    if (same) {
        out = (in + s - 1) / s;
        int total = (out - 1) * s + k - in;
        if (total < 0)
            total = 0;
        *pad_before = total / 2;
    } else {
        out = in >= k ? (in - k) / s + 1 : 0;
        *pad_before = 0;
    }
    return out;
}

int mw_conv2d_geom_init(mw_conv2d_geom *g, int H, int W, int C, int O, int KH, int KW, int SH,
                        int SW, int same)
{
    g->H = H, g->W = W, g->C = C, g->O = O, g->KH = KH, g->KW = KW, g->SH = SH, g->SW = SW;
    g->DH = 1, g->DW = 1, g->G = 1;
    if (H <= 0 || W <= 0 || C <= 0 || O <= 0 || KH <= 0 || KW <= 0 || SH <= 0 || SW <= 0)
        return -1;
    g->OH = out_size(H, KH, SH, same, &g->PT);
    g->OW = out_size(W, KW, SW, same, &g->PL);
    return g->OH > 0 && g->OW > 0 ? 0 : -1;
}

int mw_conv2d_geom_dilate(mw_conv2d_geom *g, int DH, int DW, int same)
{
    if (DH <= 0 || DW <= 0)
        return -1;
    g->DH = DH, g->DW = DW;
    g->OH = out_size(g->H, (g->KH - 1) * DH + 1, g->SH, same, &g->PT);
    g->OW = out_size(g->W, (g->KW - 1) * DW + 1, g->SW, same, &g->PL);
    return g->OH > 0 && g->OW > 0 ? 0 : -1;
}

/* JAX's conv_transpose pads the stride-dilated input with left and right zeros (Keras'
 * _convert_conv_transpose_padding_args_from_keras_to_jax) and correlates with the flipped kernel,
 * so output row o sums input row i through tap t where o = i s + t - (k - 1 - left). */
static int tr_size(int in, int k, int s, int same, int op, int *pad_before)
{
    int left, right;
    if (!same) {
        left = k - 1;
        right = k - 1 + (op >= 0 ? op : (k > s ? k : s) - k);
    } else {
        const int len = op >= 0 ? k + k % 2 - 2 + op : s + k - 2;
        left = len / 2 + len % 2 < k - 1 ? len / 2 + len % 2 : k - 1;
        right = len - left;
    }
    *pad_before = k - 1 - left;
    return (in - 1) * s + left + right - k + 2;
}

int mw_conv2d_geom_group(mw_conv2d_geom *g, int G)
{
    if (G < 1 || g->C % G || g->O % G)
        return -1;
    g->G = G;
    return 0;
}

int mw_conv2d_tr_geom_init(mw_conv2d_geom *g, int in_h, int in_w, int in_c, int filters, int KH,
                           int KW, int SH, int SW, int same, int oph, int opw)
{
    g->OH = in_h, g->OW = in_w, g->O = in_c, g->C = filters;
    g->KH = KH, g->KW = KW, g->SH = SH, g->SW = SW;
    g->DH = 1, g->DW = 1, g->G = 1;
    if (in_h <= 0 || in_w <= 0 || in_c <= 0 || filters <= 0 || KH <= 0 || KW <= 0 || SH <= 0 ||
        SW <= 0)
        return -1;
    g->H = tr_size(in_h, KH, SH, same, oph, &g->PT);
    g->W = tr_size(in_w, KW, SW, same, opw, &g->PL);
    return g->H > 0 && g->W > 0 ? 0 : -1;
}

int mw_pool_geom_init(mw_pool_geom *g, int H, int W, int C, int PH, int PW, int SH, int SW,
                      int same)
{
    g->H = H, g->W = W, g->C = C, g->PH = PH, g->PW = PW, g->SH = SH, g->SW = SW;
    if (H <= 0 || W <= 0 || C <= 0 || PH <= 0 || PW <= 0 || SH <= 0 || SW <= 0)
        return -1;
    g->OH = out_size(H, PH, SH, same, &g->PT);
    g->OW = out_size(W, PW, SW, same, &g->PL);
    return g->OH > 0 && g->OW > 0 ? 0 : -1;
}

size_t mw_conv2d_ws_min(const mw_conv2d_geom *g)
{
    return (size_t)g->OH * g->OW * g->KH * g->KW * g->C;
}

size_t mw_conv2d_ws_count(const mw_conv2d_geom *g, int N)
{
    return mw_conv2d_ws_min(g) * (size_t)(N > 0 ? N : 1);
}

size_t mw_conv2d_ws_capped(const mw_conv2d_geom *g, int N, size_t cap)
{
    const size_t per = mw_conv2d_ws_min(g), rows = (size_t)g->OH * g->OW;
    if (per == 0)
        return 0;
    size_t nb = cap / per;                    /* images per chunk that fit the cap */
    const size_t n = (size_t)(N > 0 ? N : 1); /* never more than the batch */
    nb = nb < n ? nb : n;
    if (rows > 0 && nb > (size_t)INT_MAX / rows) /* the GEMM's int rows */
        nb = (size_t)INT_MAX / rows;
    return (nb > 0 ? nb : 1) * per;
}
