/* The reference fills every entry of the backend table. */
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/conv2d.h"
#include "kernels/dense.h"
#include "kernels/dropout.h"
#include "kernels/embed.h"
#include "kernels/graphops.h"
#include "kernels/layernorm.h"
#include "kernels/loss.h"
#include "kernels/maxpool.h"
#include "kernels/optim.h"

#include <string.h>

static void zero_ref(const mw_kctx *k, void *p, size_t nbytes)
{
    (void)k;
    if (nbytes)
        memset(p, 0, nbytes);
}

void mw_kernels_init_ref(mw_kernels *t)
{
    t->name = "ref";
    t->conv2d_fwd = mw_conv2d_fwd_ref;
    t->conv2d_bwd = mw_conv2d_bwd_ref;
    t->maxpool_fwd = mw_maxpool_fwd_ref;
    t->maxpool_bwd = mw_maxpool_bwd_ref;
    t->dense_fwd = mw_dense_fwd_ref;
    t->dense_bwd = mw_dense_bwd_ref;
    t->relu_fwd = mw_relu_fwd_ref;
    t->relu_bwd = mw_relu_bwd_ref;
    t->xent_fwd = mw_xent_fwd_ref;
    t->xent_bwd = mw_xent_bwd_ref;
    t->dloss_fwd = mw_dloss_fwd_ref;
    t->dloss_bwd = mw_dloss_bwd_ref;
    t->scale_rows = mw_scale_rows_ref;
    t->row_mean = mw_row_mean_ref;
    t->embed_fwd = mw_embed_fwd_ref;
    t->sine_pos = mw_sine_pos_ref;
    t->embed_bwd = mw_embed_bwd_ref;
    t->masked_mean_fwd = mw_masked_mean_fwd_ref;
    t->masked_mean_bwd = mw_masked_mean_bwd_ref;
    t->layernorm_fwd = mw_layernorm_fwd_ref;
    t->layernorm_bwd = mw_layernorm_bwd_ref;
    t->attn_fwd = mw_attn_fwd_ref;
    t->attn_bwd = mw_attn_bwd_ref;
    t->dropout_fwd = mw_dropout_fwd_ref;
    t->dropout_bwd = mw_dropout_bwd_ref;
    t->zero = zero_ref;
    t->regularize = mw_regularize_ref;
    t->bn_fwd_train = mw_bn_fwd_train_ref;
    t->bn_fwd_infer = mw_bn_fwd_infer_ref;
    t->bn_bwd = mw_bn_bwd_ref;
    t->bn_stats_acc = mw_bn_stats_acc_ref;
    t->bn_stats_update = mw_bn_stats_update_ref;
    t->bn_sums = mw_bn_sums_ref;
    t->bn_sync_fwd = mw_bn_sync_fwd_ref;
    t->bn_sync_bwd = mw_bn_sync_bwd_ref;
    t->avgpool_fwd = mw_avgpool_fwd_ref;
    t->avgpool_bwd = mw_avgpool_bwd_ref;
    t->pad2d_fwd = mw_pad2d_fwd_ref;
    t->pad2d_bwd = mw_pad2d_bwd_ref;
    t->acc = mw_acc_ref;
    t->mul_fwd = mw_mul_fwd_ref;
    t->mul_bwd = mw_mul_bwd_ref;
    t->concat_fwd = mw_concat_fwd_ref;
    t->concat_bwd = mw_concat_bwd_ref;
    t->act_fwd = mw_act_fwd_ref;
    t->act_bwd = mw_act_bwd_ref;
    t->softmax_fwd = mw_softmax_fwd_ref;
    t->softmax_bwd = mw_softmax_bwd_ref;
    t->sgd_step = mw_sgd_step_ref;
    t->adam_step = mw_adam_step_ref;
    t->rmsprop_step = mw_rmsprop_step_ref;
    t->adagrad_step = mw_adagrad_step_ref;
    t->adamax_step = mw_adamax_step_ref;
    t->sumsq = mw_sumsq_ref;
    t->round_bf16 = mw_round_bf16_ref;
    t->round_f16 = mw_round_f16_ref;
}
