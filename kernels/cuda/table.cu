/* The CUDA backend table: every entry becomes its CUDA twin, but only when a
 * device is usable, so a host without one keeps its reference/CPU table. */
#include "kernels/cuda/dev.cuh"

extern "C" {
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
}

/* Failures are recorded in the context's sticky status (see cuda.h). */
static void zero_cuda(const mw_kctx *k, void *p, size_t nbytes)
{
    (void)mw_cuda_zero(p, nbytes, k);
}

extern "C" void mw_kernels_init_cuda(mw_kernels *t)
{
    if (mw_cuda_device_count() <= 0)
        return;
    t->name = "cuda";
    t->conv2d_fwd = mw_conv2d_fwd_cuda;
    t->conv2d_bwd = mw_conv2d_bwd_cuda;
    t->maxpool_fwd = mw_maxpool_fwd_cuda;
    t->maxpool_bwd = mw_maxpool_bwd_cuda;
    t->dense_fwd = mw_dense_fwd_cuda;
    t->dense_bwd = mw_dense_bwd_cuda;
    t->relu_fwd = mw_relu_fwd_cuda;
    t->relu_bwd = mw_relu_bwd_cuda;
    t->xent_fwd = mw_xent_fwd_cuda;
    t->xent_bwd = mw_xent_bwd_cuda;
    t->dloss_fwd = mw_dloss_fwd_cuda;
    t->dloss_bwd = mw_dloss_bwd_cuda;
    t->scale_rows = mw_scale_rows_cuda;
    t->row_mean = mw_row_mean_cuda;
    t->embed_fwd = mw_embed_fwd_cuda;
    t->sine_pos = mw_sine_pos_cuda;
    t->embed_bwd = mw_embed_bwd_cuda;
    t->masked_mean_fwd = mw_masked_mean_fwd_cuda;
    t->masked_mean_bwd = mw_masked_mean_bwd_cuda;
    t->layernorm_fwd = mw_layernorm_fwd_cuda;
    t->layernorm_bwd = mw_layernorm_bwd_cuda;
    t->attn_fwd = mw_attn_fwd_cuda;
    t->attn_bwd = mw_attn_bwd_cuda;
    t->dropout_fwd = mw_dropout_fwd_cuda;
    t->dropout_bwd = mw_dropout_bwd_cuda;
    t->zero = zero_cuda;
    t->regularize = mw_regularize_cuda;
    t->bn_fwd_train = mw_bn_fwd_train_cuda;
    t->bn_fwd_infer = mw_bn_fwd_infer_cuda;
    t->bn_bwd = mw_bn_bwd_cuda;
    t->bn_stats_acc = mw_bn_stats_acc_cuda;
    t->bn_stats_update = mw_bn_stats_update_cuda;
    t->bn_sums = mw_bn_sums_cuda;
    t->bn_sync_fwd = mw_bn_sync_fwd_cuda;
    t->bn_sync_bwd = mw_bn_sync_bwd_cuda;
    t->avgpool_fwd = mw_avgpool_fwd_cuda;
    t->avgpool_bwd = mw_avgpool_bwd_cuda;
    t->pad2d_fwd = mw_pad2d_fwd_cuda;
    t->pad2d_bwd = mw_pad2d_bwd_cuda;
    t->acc = mw_acc_cuda;
    t->round_bf16 = mw_round_bf16_cuda;
    t->round_f16 = mw_round_f16_cuda;
    t->mul_fwd = mw_mul_fwd_cuda;
    t->mul_bwd = mw_mul_bwd_cuda;
    t->concat_fwd = mw_concat_fwd_cuda;
    t->concat_bwd = mw_concat_bwd_cuda;
    t->act_fwd = mw_act_fwd_cuda;
    t->act_bwd = mw_act_bwd_cuda;
    t->softmax_fwd = mw_softmax_fwd_cuda;
    t->softmax_bwd = mw_softmax_bwd_cuda;
    t->sgd_step = mw_sgd_step_cuda;
    t->adam_step = mw_adam_step_cuda;
    t->rmsprop_step = mw_rmsprop_step_cuda;
    t->adagrad_step = mw_adagrad_step_cuda;
    t->adamax_step = mw_adamax_step_cuda;
    t->sumsq = mw_sumsq_cuda;
}
