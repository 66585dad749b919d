/* The fast CPU path: the reference table with the fast entries overriding. */
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/conv2d.h"
#include "kernels/dense.h"
#include "kernels/dropout.h"
#include "kernels/graphops.h"
#include "kernels/layernorm.h"
#include "kernels/maxpool.h"
#include "kernels/optim.h"

void mw_kernels_init_cpu(mw_kernels *t)
{
    mw_kernels_init_ref(t);
    t->name = "cpu";
    t->conv2d_fwd = mw_conv2d_fwd_cpu;
    t->conv2d_bwd = mw_conv2d_bwd_cpu;
    t->maxpool_fwd = mw_maxpool_fwd_cpu;
    t->maxpool_bwd = mw_maxpool_bwd_cpu;
    t->dense_fwd = mw_dense_fwd_cpu;
    t->dense_bwd = mw_dense_bwd_cpu;
    t->layernorm_fwd = mw_layernorm_fwd_cpu;
    t->layernorm_bwd = mw_layernorm_bwd_cpu;
    t->attn_fwd = mw_attn_fwd_cpu;
    t->attn_bwd = mw_attn_bwd_cpu;
    t->relu_fwd = mw_relu_fwd_cpu;
    t->relu_bwd = mw_relu_bwd_cpu;
    t->xent_fwd = mw_xent_fwd_cpu;
    t->xent_bwd = mw_xent_bwd_cpu;
    t->dropout_fwd = mw_dropout_fwd_cpu;
    t->dropout_bwd = mw_dropout_bwd_cpu;
    t->bn_fwd_train = mw_bn_fwd_train_cpu;
    t->bn_fwd_infer = mw_bn_fwd_infer_cpu;
    t->bn_bwd = mw_bn_bwd_cpu;
    t->bn_sums = mw_bn_sums_cpu;
    t->bn_sync_fwd = mw_bn_sync_fwd_cpu;
    t->bn_sync_bwd = mw_bn_sync_bwd_cpu;
    t->sgd_step = mw_sgd_step_cpu;
    t->adam_step = mw_adam_step_cpu;
    t->rmsprop_step = mw_rmsprop_step_cpu;
    t->adagrad_step = mw_adagrad_step_cpu;
    t->adamax_step = mw_adamax_step_cpu;
    t->avgpool_fwd = mw_avgpool_fwd_cpu;
    t->avgpool_bwd = mw_avgpool_bwd_cpu;
    t->pad2d_fwd = mw_pad2d_fwd_cpu;
    t->pad2d_bwd = mw_pad2d_bwd_cpu;
    t->acc = mw_acc_cpu;
    t->mul_fwd = mw_mul_fwd_cpu;
    t->mul_bwd = mw_mul_bwd_cpu;
    t->concat_fwd = mw_concat_fwd_cpu;
    t->concat_bwd = mw_concat_bwd_cpu;
    t->act_fwd = mw_act_fwd_cpu;
    t->act_bwd = mw_act_bwd_cpu;
    t->softmax_fwd = mw_softmax_fwd_cpu;
    t->softmax_bwd = mw_softmax_bwd_cpu;
    t->round_bf16 = mw_round_bf16_cpu;
    t->round_f16 = mw_round_f16_cpu;
}
