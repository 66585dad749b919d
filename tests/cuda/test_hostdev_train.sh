#!/usr/bin/env bash
# The GPU training loop (worker/train.c over worker/replicas/replicas_gpu.c) without a GPU: mwtrain opens
# the hostdev module through MW_CUDA_MODULE, as it opens mwtrain-cuda.so; the module is the GPU
# backend with its CUDA calls answered by fake devices in host memory (tests/hostdev.c: the CPU
# kernels behind wrappers that abort on any pointer outside the context's device memory) and
# NCCL by the mock (tests/nccl_mock.c). This test holds the numbers of each GPU layout to the
# CPU's (both sides run oneDNN's kernels under the host's one ISA, so it is not in the suite
# 'isa': tests/cuda/meson.build says why); test_hostdev_jobs.sh has the jobs around training
# (checkpoints, eval, the evaluator, failures, `cluster`, refused layouts). Asserted:
#   - each GPU layout trains like the CPU with the same replicas: one rank x 2 GPUs, 2 ranks x
#     1 GPU on one node, 2 fake nodes x 2 GPUs (NCCL reduce-scatter, host ring, all-gather),
#     2 replicas per GPU, SGD, and the Dropout + L2 Keras CNN (the weight penalty on the
#     device): the same epoch losses and weights within 1e-4 relative;
#   - mixed_float16 on the fake GPUs: one step as the reference backend's within 1e-4, and a
#     LossScaleOptimizer's loss scale and skipped steps over 12 steps the same; a token model
#     with MultiHeadAttention, and ones of KerasHub's blocks (Llama's and Gemma's too), under
#     mixed_bfloat16: one step as the reference backend's within 1e-4;
#   - a segmentation model (labels per pixel, Conv2DTranspose, UpSampling2D) as the CPU trains it;
#   - token models through KerasHub's blocks (TransformerEncoder and TransformerDecoder, and
#     LlamaTransformerDecoder's grouped-query attention) as the CPU trains them;
#   - Functional models on the GPU path (BatchNormalization, Add, pooling, padding, Multiply,
#     Concatenate, activation and softmax layers, KerasHub's ViT layers), one rank x 2 GPUs and
#     2 ranks x 1 GPU,
#     the moving statistics folded in on the devices: the same, against the CPU; a BN
#     model's replica slice larger than a device micro-batch still runs in one pass;
#   - --overlap-allreduce on: the buckets on the reduce streams give the serial path's bits (one
#     rank x 2 GPUs, 2 x 1, 2 replicas per GPU, L2, BN, KerasHub blocks, a bucket per layer);
#     across hierarchical nodes and with synchronized BN a warning says why it is not used;
#   - --gpu-allreduce nccl: one communicator over 2 fake nodes x 2 GPUs trains like the CPU, and
#     overlaps its buckets bit for bit;
#   - --timeline on the GPU path (two fake nodes): every step has the NCCL all-reduce's parts,
#     and the next step's batch is assembled and uploaded while the update runs (prefetch);
#   - the asynchronous step (MW_HOSTDEV_STATS): per step no blocking sync, 32 bytes of metrics
#     per GPU downloaded (the running sums the model's one metric uses: kernels.h MW_SUM_*),
#     one polled staging wait per micro-batch;
#   - synchronized BatchNormalization on the devices (lockstep, sums through the host) trains
#     like the CPU, 1 rank x 2 GPUs and 2 ranks x 1 GPU;
#   - Keras' other optimizers on the devices (RMSprop with momentum and clipnorm, Adam's
#     amsgrad with global_clipnorm, Adagrad under a warm-up schedule with clipvalue) like the CPU.
#   test_hostdev_train.sh HOSTDEV_MODULE MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/hostdev_common.sh"

# Where a rank sums its devices' gradients in another order than the CPU sums its replicas',
# the weights are compared after SGD: Adam turns a gradient of 0 on one side and 1e-12 on the
# other into steps of 0 and lr, so after a dozen steps its weights differ by ~lr wherever a
# gradient is exactly zero (seen at 6.7e-4 relative on AMD EPYC), which says nothing about the
# loop. Adam on the devices is compared where the order is the same (two fake nodes below).
sgd=(--batch-per-replica 16 --optimizer sgd --learning-rate 0.05)
run gpu-1x2 1 2 "$hd" --device gpu "${sgd[@]}"
check 'grep -qF "info: training on CUDA devices 0-1 as 2 replicas $stand_in" "$tmp/gpu-1x2.out"' \
    "one rank drives both fake GPUs as replicas"
check 'grep -qF "; im2col convolutions (the CPU kernels of the host stand-in), FP32 math" \
           "$tmp/gpu-1x2.out"' "the start-up line: the convolutions and FP32 by default"
out=$(MW_HOSTDEV_GPUS=1 timeout 60 "$hd" train "${quick[@]}" --device gpu --steps-per-epoch 2 \
    --tf32 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -qF ", TF32 tensor-core math (--tf32)" <<<"$out"' \
    "--tf32 says so in the start-up line: $(grep "training on" <<<"$out")"
run cpu-1x2 1 0 "$mw" --device cpu --replicas-per-worker 2 --threads 1 "${sgd[@]}"
same gpu-1x2 cpu-1x2
# The losses of float targets on the fake GPUs (worker/model/loss.h: the dense-loss kernels,
# float targets and sample weights staged and uploaded, the metric summed on the devices): MSE
# (and MAE) on (N, 3) regression targets with sample weights, focal cross-entropy from logits
# on multi-hot ones (with --metrics binary_accuracy,auc,mse: the device metrics and AUC's
# buckets), the sparse loss with ignore_class 255 on a quarter of the labels (its factors
# in the uploaded weights, the kernels' zero loss for the label), and a token model, each like
# the CPU with the same replicas
/usr/bin/python3 - "$tmp" "$src/tests/cuda" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import token_models
import numpy as np
r = np.random.default_rng(7)
x = r.normal(size=(448, 6)).astype(np.float32)
w = r.normal(size=(6, 3)).astype(np.float32)
np.savez(sys.argv[1] + "/reg.npz", x_train=x[:384], y_train=x[:384] @ w, x_test=x[384:],
         y_test=x[384:] @ w, sample_weight_train=r.uniform(0, 2, 384).astype(np.float32))
hot = (x @ w > 0).astype(np.float32)
np.savez(sys.argv[1] + "/hot.npz", x_train=x[:384], y_train=hot[:384], x_test=x[384:],
         y_test=hot[384:])
lab = np.argmax(x @ w, 1).astype(np.int32)
lab[::4] = 255
np.savez(sys.argv[1] + "/ign.npz", x_train=x[:384], y_train=lab[:384], x_test=x[384:],
         y_test=lab[384:])
# 33 examples: with 2 GPUs of 16, a step's second GPU gets none (the overlap's buckets below)
cls = np.argmax(x @ w, 1).astype(np.int32)
np.savez(sys.argv[1] + "/odd.npz", x_train=x[:33], y_train=cls[:33], x_test=x[384:392],
         y_test=cls[384:392])
json.dump({"class_name": "Sequential", "config": {"name": "odd", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 6], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "h", "units": 8, "activation": "relu",
     "kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}},
    open(sys.argv[1] + "/odd.json", "w"))
dense = lambda n, u: {"class_name": "Dense", "config": {"name": n, "units": u}}
json.dump({"class_name": "Sequential", "config": {"name": "tab", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 6], "name": "in"}},
    dense("hidden", 16), {"class_name": "Activation", "config": {"name": "r",
                                                                  "activation": "relu"}},
    dense("out", 3)]}}, open(sys.argv[1] + "/tab.json", "w"))
json.dump({"class_name": "MeanSquaredError", "config": {}}, open(sys.argv[1] + "/mse.json", "w"))
json.dump({"class_name": "BinaryFocalCrossentropy", "config": {"from_logits": True,
           "apply_class_balancing": True}}, open(sys.argv[1] + "/focal.json", "w"))
json.dump({"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": True,
           "ignore_class": 255}}, open(sys.argv[1] + "/ign.json", "w"))
tok = r.integers(0, 50, size=(448, 12)).astype(np.uint16)
np.savez(sys.argv[1] + "/tok.npz", x_train=tok[:384], y_train=(tok[:384, 0] % 3).astype(np.int32),
         x_test=tok[384:], y_test=(tok[384:, 0] % 3).astype(np.int32))
json.dump({"class_name": "Sequential", "config": {"name": "tok", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 12], "dtype": "int32",
                                            "name": "in"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 50, "output_dim": 8}},
    {"class_name": "LayerNormalization", "config": {"name": "ln"}},
    {"class_name": "Dense", "config": {"name": "ff", "units": 6, "activation": "relu"}},
    {"class_name": "GlobalAveragePooling1D", "config": {"name": "gap"}},
    dense("out", 3)]}}, open(sys.argv[1] + "/tok.json", "w"))
json.dump({"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": True}},
          open(sys.argv[1] + "/tok-loss.json", "w"))
json.dump({"class_name": "Sequential", "config": {"name": "tokm", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 12], "dtype": "int32",
                                            "name": "in"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 50, "output_dim": 8,
                                           "mask_zero": True}},
    {"class_name": "GlobalAveragePooling1D", "config": {"name": "gap"}},
    dense("out", 3)]}}, open(sys.argv[1] + "/tokm.json", "w"))
np.savez(sys.argv[1] + "/tags.npz", x_train=tok[:384], y_train=(tok[:384] % 3).astype(np.int32),
         x_test=tok[384:], y_test=(tok[384:] % 3).astype(np.int32))
json.dump({"class_name": "Sequential", "config": {"name": "tokt", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 12], "dtype": "int32",
                                            "name": "in"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 50, "output_dim": 8}},
    dense("out", 3)]}}, open(sys.argv[1] + "/tokt.json", "w"))
pad = tok.copy()  # sequences 1..12 long, the rest id 0
for i, n in enumerate(r.integers(1, 13, size=448)):
    pad[i, n:] = 0
np.savez(sys.argv[1] + "/tagp.npz", x_train=pad[:384], y_train=(pad[:384] % 3).astype(np.int32),
         x_test=pad[384:], y_test=(pad[384:] % 3).astype(np.int32))
json.dump({"class_name": "Sequential", "config": {"name": "tokp", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [None, 12], "dtype": "int32",
                                            "name": "in"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 50, "output_dim": 8,
                                           "mask_zero": True}},
    {"class_name": "LayerNormalization", "config": {"name": "ln"}},
    dense("out", 3)]}}, open(sys.argv[1] + "/tokp.json", "w"))
json.dump({"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": True,
           "ignore_class": 1}}, open(sys.argv[1] + "/tokp-loss.json", "w"))
ref, node = token_models.ref, token_models.node
json.dump({"class_name": "Functional", "config": {"name": "tokmha", "layers": [
    {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
     "config": {"batch_shape": [None, 12], "dtype": "int32", "name": "in"}},
    {"class_name": "Embedding", "name": "emb", "inbound_nodes": node(ref("in")),
     "config": {"name": "emb", "input_dim": 50, "output_dim": 8, "mask_zero": True}},
    {"class_name": "MultiHeadAttention", "name": "att",
     "inbound_nodes": node(ref("emb"), ref("emb"), use_causal_mask=True),
     "config": {"name": "att", "num_heads": 2, "key_dim": 4, "value_dim": 3, "dropout": 0.25}},
    {"class_name": "Add", "name": "res", "inbound_nodes": node([ref("emb"), ref("att")]),
     "config": {"name": "res"}},
    {"class_name": "LayerNormalization", "name": "ln", "inbound_nodes": node(ref("res")),
     "config": {"name": "ln"}},
    {"class_name": "SinePositionEncoding", "name": "sine", "registered_name":
     "keras_hub>SinePositionEncoding", "inbound_nodes": node(ref("ln")),
     "config": {"name": "sine", "max_wavelength": 100}},
    {"class_name": "Add", "name": "pos", "inbound_nodes": node([ref("ln"), ref("sine")]),
     "config": {"name": "pos"}},
    {"class_name": "GlobalAveragePooling1D", "name": "gap", "inbound_nodes": node(ref("pos")),
     "config": {"name": "gap"}},
    {"class_name": "Dense", "name": "out", "inbound_nodes": node(ref("gap")),
     "config": {"name": "out", "units": 3}}],
    "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}},
    open(sys.argv[1] + "/tokmha.json", "w"))
json.dump(token_models.blocks("tokblk", 0.2), open(sys.argv[1] + "/tokblk.json", "w"))
json.dump({"class_name": "Functional", "config": {"name": "tokllama", "layers": [
    {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
     "config": {"batch_shape": [None, 12], "dtype": "int32", "name": "in"}},
    {"class_name": "Embedding", "name": "emb", "inbound_nodes": node(ref("in")),
     "config": {"name": "emb", "input_dim": 50, "output_dim": 8, "mask_zero": True}}] + [
    {"class_name": "LlamaTransformerDecoder", "name": n, "registered_name":
     "LlamaTransformerDecoder", "module": "keras_hub.src.models.llama.llama_decoder",
     "inbound_nodes": node(ref(prev)), "config": {"name": n, "intermediate_dim": 16,
     "num_query_heads": 4, "num_key_value_heads": kv}}
    for n, prev, kv in (("llama0", "emb", 2), ("llama1", "llama0", 1))] + [
    {"class_name": "GlobalAveragePooling1D", "name": "gap", "inbound_nodes": node(ref("llama1")),
     "config": {"name": "gap"}},
    {"class_name": "Dense", "name": "out", "inbound_nodes": node(ref("gap")),
     "config": {"name": "out", "units": 3}}],
    "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}},
    open(sys.argv[1] + "/tokllama.json", "w"))
gemma = lambda n, prev, **kw: {
    "class_name": "GemmaDecoderBlock", "registered_name": "GemmaDecoderBlock", "name": n,
    "module": "keras_hub.src.models.gemma.gemma_decoder_block", "inbound_nodes": node(ref(prev)),
    "config": dict(dict(name=n, hidden_dim=8, intermediate_dim=16, head_dim=6,
                        num_query_heads=4, num_key_value_heads=2, layer_norm_epsilon=1e-6,
                        dropout=0, use_post_ffw_norm=False, use_post_attention_norm=False,
                        logit_soft_cap=None, use_sliding_window_attention=False,
                        sliding_window_size=4096, query_head_dim_normalize=True), **kw)}
json.dump({"class_name": "Functional", "config": {"name": "tokgemma", "layers": [
    {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
     "config": {"batch_shape": [None, 12], "dtype": "int32", "name": "in"}},
    {"class_name": "Embedding", "name": "emb", "inbound_nodes": node(ref("in")),
     "config": {"name": "emb", "input_dim": 50, "output_dim": 8}},
    gemma("gem0", "emb"),
    gemma("gem1", "gem0", **{"use_post_ffw_norm": True, "use_post_attention_norm": True,
                             "logit_soft_cap": 1.0, "use_sliding_window_attention": True,
                             "sliding_window_size": 3}),
    {"class_name": "GlobalAveragePooling1D", "name": "gap", "inbound_nodes": node(ref("gem1")),
     "config": {"name": "gap"}},
    {"class_name": "Dense", "name": "out", "inbound_nodes": node(ref("gap")),
     "config": {"name": "out", "units": 3}}],
    "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}},
    open(sys.argv[1] + "/tokgemma.json", "w"))
img = r.integers(0, 256, size=(448, 8, 8)).astype(np.uint8)  # a class per pixel: 3 levels
seg = ((img > 100).astype(np.int32) + (img > 200)).astype(np.uint8)
np.savez(sys.argv[1] + "/seg.npz", x_train=img[:384], y_train=seg[:384], x_test=img[384:],
         y_test=seg[384:])
conv = lambda n, f, k, inb, **kw: {"class_name": "Conv2D", "name": n, "inbound_nodes": inb,
                                   "config": dict(name=n, filters=f, kernel_size=k,
                                                  padding="same", **kw)}
json.dump({"class_name": "Functional", "config": {"name": "seg", "layers": [
    {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
     "config": {"batch_shape": [None, 8, 8, 1], "name": "in"}},
    conv("c1", 4, 3, node(ref("in")), activation="relu"),
    {"class_name": "MaxPooling2D", "name": "p1", "inbound_nodes": node(ref("c1")),
     "config": {"name": "p1"}},
    conv("c2", 4, 3, node(ref("p1")), activation="relu"),
    {"class_name": "UpSampling2D", "name": "up", "inbound_nodes": node(ref("c2")),
     "config": {"name": "up", "interpolation": "bilinear"}},
    {"class_name": "Concatenate", "name": "skip", "inbound_nodes": node([ref("up"), ref("c1")]),
     "config": {"name": "skip"}},
    {"class_name": "Conv2DTranspose", "name": "t", "inbound_nodes": node(ref("skip")),
     "config": {"name": "t", "filters": 4, "kernel_size": 3, "padding": "same"}},
    {"class_name": "Conv2DTranspose", "name": "t2", "inbound_nodes": node(ref("p1")),
     "config": {"name": "t2", "filters": 4, "kernel_size": 2, "strides": 2}},
    {"class_name": "Add", "name": "sum", "inbound_nodes": node([ref("t"), ref("t2")]),
     "config": {"name": "sum"}},
    conv("out", 3, 1, node(ref("sum")))],
    "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}},
    open(sys.argv[1] + "/seg.json", "w"))
PY
for loss in mse focal ign tok tokm tokt tokp tokmha tokblk tokllama seg; do
    data=$tmp/reg.npz metrics=() model=$tmp/tab.json lossf=$tmp/$loss.json
    [[ $loss == focal ]] && data=$tmp/hot.npz metrics=(--metrics binary_accuracy,auc,mse)
    [[ $loss == ign ]] && data=$tmp/ign.npz
    # token ids (uint16) through an Embedding (its gather and scatter-add twins), a
    # LayerNormalization and a Dense on each position, 1-D global average pooling; tokm the
    # same with Embedding(mask_zero=True), some ids 0 (padding), and the masked pooling
    [[ $loss == tok* ]] && data=$tmp/tok.npz model=$tmp/$loss.json lossf=$tmp/tok-loss.json
    # tokt: a label per position (N, 12): the loss and the token accuracy on each position;
    # tokmha: a MultiHeadAttention (causal and padding masks, dropout of the probabilities:
    # the same multipliers on the devices as on the CPU) in a Functional graph, and KerasHub's
    # SinePositionEncoding (its kernel) added after it; tokblk: KerasHub's TransformerEncoder
    # and TransformerDecoder with dropout (the encoder's padding mask, the decoder's on its keys);
    # tokllama: KerasHub's LlamaTransformerDecoder, 4 query heads on 2 key heads then on 1
    # (grouped-query attention, the rotation of the query and key, the gated feed-forward)
    [[ $loss == tokt ]] && data=$tmp/tags.npz
    # tokp: padded, the mask reaching the loss per position with ignore_class 1 (the weights
    # of the positions that count, the valid count of the global batch, the masked accuracy)
    [[ $loss == tokp ]] && data=$tmp/tagp.npz lossf=$tmp/tokp-loss.json
    # seg: a class per pixel, labels (N, 8, 8), of a small U-Net (UpSampling2D bilinear,
    # Concatenate, Conv2DTranspose stride 1 and 2: their kernels and the scratch they share
    # with Conv2D)
    [[ $loss == seg ]] && data=$tmp/seg.npz model=$tmp/seg.json lossf=$tmp/tok-loss.json
    tab=(--data "$data" --model "$model" --loss-config "$lossf" "${sgd[@]}" "${metrics[@]}")
    run gpu-1x2-$loss 1 2 "$hd" --device gpu "${tab[@]}"
    run cpu-1x2-$loss 1 0 "$mw" --device cpu --replicas-per-worker 2 --threads 1 "${tab[@]}"
    same gpu-1x2-$loss cpu-1x2-$loss
done
check 'grep -qF ", MAE: " "$tmp/gpu-1x2-mse.out" && grep -qF "Examples/s: " "$tmp/gpu-1x2-mse.out"' \
    "a regression's epoch line names its metric and examples: $(grep Epoch "$tmp/gpu-1x2-mse.out")"
check 'grep -qE "Loss: [0-9.]+, Accuracy: [0-9.]+, AUC: 0\.[0-9]+, MSE: [0-9.]+, Test Loss" \
    "$tmp/gpu-1x2-focal.out"' \
    "the metrics in --metrics' order on the GPU path: $(grep Epoch "$tmp/gpu-1x2-focal.out" | head -1)"
# mixed_bfloat16 on the fake GPUs (the rounding twin, and the products flagged as bfloat16 to
# the kernels: the CPU's bfloat16 matmul behind the stand-in) trains like the CPU's
# mixed_bfloat16 with the same replicas, the bfloat16 weights cache in device memory; where the
# CPU refuses mixed_bfloat16 (no bf16 instructions) the pair is skipped, visibly; any other
# failure of the probe fails the test (it once trained in ./training_checkpoints of the build
# directory and skipped whenever another test held that directory's lock)
bf16_probe() {
    out=$("$mw" train --epochs 0 --dtype-policy mixed_bfloat16 --checkpoint-every-epochs 0 \
        --summary-dir "" 2>&1) && return 0
    check 'grep -qF "have no bfloat16 instructions" <<<"$out"' \
        "the mixed_bfloat16 probe fails only for want of bf16 instructions: ${out##*error: }"
    return 1
}
if bf16_probe; then
    run gpu-1x2-bf16 1 2 "$hd" --device gpu "${sgd[@]}" --dtype-policy mixed_bfloat16
    check 'grep -qF ", mixed_bfloat16 (" "$tmp/gpu-1x2-bf16.out"' \
        "the start-up line names the policy: $(grep "training on" "$tmp/gpu-1x2-bf16.out")"
    run cpu-1x2-bf16 1 0 "$mw" --device cpu --replicas-per-worker 2 --threads 1 "${sgd[@]}" \
        --dtype-policy mixed_bfloat16
    same gpu-1x2-bf16 cpu-1x2-bf16
    check "! '$cmp' '$tmp/cpu-1x2.bin' '$tmp/cpu-1x2-bf16.bin' 1e-3 >/dev/null" \
        "mixed_bfloat16 changed the training (float32 vs bfloat16 weights differ by > 1e-3)"
else
    echo "SKIP: mixed_bfloat16 on the fake GPUs: the CPU side refuses it here (${out##*error: })"
fi

# mixed_float16 on the fake GPUs (the float16 rounding twin, products flagged as float16, the
# loss scale, the finite check of the summed gradients and the skipped update) against the
# reference backend's mixed_float16 (the CPU's fast path refuses it) with the same replicas.
# One step (Keras' default scale 2^15): the same weights within 1e-4; the two sum in other
# orders, and over more steps float16's rounding of the weights amplifies that noise (6.7e-4
# after 12). Twelve steps of a LossScaleOptimizer from 2^24 with growth every 3 steps (it skips,
# halves and doubles): the same loss scale and skipped steps after the epoch
run gpu-1x2-f16 1 2 "$hd" --device gpu --dtype-policy mixed_float16 --steps-per-epoch 1
check 'grep -qF ", mixed_float16 (" "$tmp/gpu-1x2-f16.out"' \
    "the start-up line names the policy: $(grep "training on" "$tmp/gpu-1x2-f16.out")"
run ref-1x2-f16 1 0 "$mw" --device cpu --backend ref --replicas-per-worker 2 --threads 1 \
    --dtype-policy mixed_float16 --steps-per-epoch 1
same gpu-1x2-f16 ref-1x2-f16
printf '%s' '{"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": {"class_name":
  "SGD", "config": {"learning_rate": 0.05}}, "initial_scale": 16777216.0,
  "dynamic_growth_steps": 3}}' >"$tmp/lso.json"
f16=(--optimizer-config "$tmp/lso.json" --dtype-policy mixed_float16)
# (16 images a replica: the reference backend's convolutions take most of the test's time)
run gpu-1x2-lso 1 2 "$hd" --device gpu "${f16[@]}" --batch-per-replica 16
run ref-1x2-lso 1 0 "$mw" --device cpu --backend ref --replicas-per-worker 2 --threads 1 \
    "${f16[@]}" --batch-per-replica 16
scale_of() { sed -n 's/.*epoch 1: loss scale \([^ ]*\) after \([0-9]*\) step.*/\1 \2/p' "$tmp/$1.out"; }
check '[[ -n "$(scale_of gpu-1x2-lso)" && "$(scale_of gpu-1x2-lso)" == "$(scale_of ref-1x2-lso)" ]] &&
       ! [[ "$(scale_of gpu-1x2-lso)" =~ \ 0$ ]]' \
    "the loss scale and the skipped steps: fake GPUs '$(scale_of gpu-1x2-lso)', ref '$(scale_of ref-1x2-lso)'"

# MultiHeadAttention under mixed_bfloat16 on the fake GPUs (its projections, probabilities,
# heads' outputs and their gradients rounded: the CUDA table's rounding kernel, the attention's
# own): one step as the reference backend's, within 1e-4 (tokmha: causal and padding masks,
# dropout of the probabilities; tokblk: KerasHub's TransformerEncoder and TransformerDecoder;
# tokllama: LlamaTransformerDecoder, the rotation and grouped-query heads; tokgemma: two
# GemmaDecoderBlocks, the second with Gemma 2's soft cap and window: the 16-bit scores and their
# gradient, the rounded query scale)
for blk in tokmha tokblk tokllama tokgemma; do
    b16=(--dtype-policy mixed_bfloat16 --steps-per-epoch 1 --data "$tmp/tok.npz" --model
         "$tmp/$blk.json" --loss-config "$tmp/tok-loss.json")
    run gpu-1x2-$blk-16 1 2 "$hd" --device gpu "${sgd[@]}" "${b16[@]}"
    run ref-1x2-$blk-16 1 0 "$mw" --device cpu --backend ref --replicas-per-worker 2 --threads 1 \
        "${sgd[@]}" "${b16[@]}"
    same gpu-1x2-$blk-16 ref-1x2-$blk-16
done
# KerasHub's ViT layers under mixed_bfloat16 likewise (the class token rounded where it joins
# the 16-bit patches; x[:, 0] in its input's dtype)
vb16=(--dtype-policy mixed_bfloat16 --steps-per-epoch 1
      --model "$src/tests/data/keras/graph/gradcheck_vit.json")
run gpu-1x2-vit-16 1 2 "$hd" --device gpu "${sgd[@]}" "${vb16[@]}"
run ref-1x2-vit-16 1 0 "$mw" --device cpu --backend ref --replicas-per-worker 2 --threads 1 \
    "${sgd[@]}" "${vb16[@]}"
same gpu-1x2-vit-16 ref-1x2-vit-16

run gpu-2x1-sgd 2 2 "$hd" --device gpu "${sgd[@]}"
check 'grep -qF "info: training on CUDA device 0 $stand_in" "$tmp/gpu-2x1-sgd.out"' \
    "two ranks on one node: one fake GPU each"
run cpu-2x1-sgd 2 0 "$mw" --device cpu --threads 1 "${sgd[@]}"
same gpu-2x1-sgd cpu-2x1-sgd

TFC=$two_nodes run gpu-2nodes-x2 2 2 "$hd" --device gpu --batch-per-replica 8 \
    --timeline "$tmp/gpu-tl-%r.json"
check 'grep -qF "2 rank(s) on 2 node(s) x 2 replica(s), global batch 32, 2 GPU(s) per rank" \
           "$tmp/gpu-2nodes-x2.out"' "two fake nodes, two fake GPUs each"
# --timeline on the GPU path: the NCCL all-reduce's parts in every step of both ranks, and the
# next step's batch assembled while this step's update runs (one micro-batch per fake GPU here:
# no step but the first assembles its data in its forward/backward)
gpu_tl=("all-reduce (NCCL intra-node reduce-scatter)" "all-reduce (inter-node ring)"
        "all-reduce (NCCL intra-node all-gather)")
for r in 0 1; do
    out=$(python3 "$src/tests/mpi/check_timeline.py" --prefetched 12 "$tmp/gpu-tl-$r.json" $r \
        "${gpu_tl[@]}")
    rc=$?
    check '[[ $rc -eq 0 ]]' "GPU timeline of rank $r: $(tail -n 4 <<<"$out")"
done
run cpu-1x4 1 0 "$mw" --device cpu --replicas-per-worker 4 --threads 1 --batch-per-replica 8
same gpu-2nodes-x2 cpu-1x4
# 2 replicas per fake GPU against 4 CPU replicas: 4 steps, not 12. The tolerance holds while both
# sides take the same branch at every kink; a MaxPooling2D window whose two largest values are
# within rounding of each other is one where they may not. Under ONEDNN_MAX_CPU_ISA=AVX2, oneDNN
# sums the last rows of the CPU replica's 968-row convolution product in another order (up to
# 8.9e-6 relative, measured on identical rows), and in step 5 one of ~130 windows whose top two
# values lie within 1e-5 of each other changes its argmax: the gradient goes to another pixel,
# and 12 steps later the weights are 0.0075 apart. The sum order this pair checks (replicas per
# device, then devices) is in every step; 4 steps check it as well as 12.
sgd8=(--batch-per-replica 8 --optimizer sgd --learning-rate 0.05 --steps-per-epoch 4)
run gpu-1x2-rep4 1 2 "$hd" --device gpu "${sgd8[@]}" --replicas-per-worker 4
run cpu-1x4-sgd 1 0 "$mw" --device cpu --replicas-per-worker 4 --threads 1 "${sgd8[@]}"
same gpu-1x2-rep4 cpu-1x4-sgd

cnn=$src/tests/data/keras/cnn_dropout_k2.json
run gpu-keras 1 2 "$hd" --device gpu --model "$cnn" --batch-per-replica 16
run cpu-keras 1 0 "$mw" --device cpu --model "$cnn" --replicas-per-worker 2 --threads 1 \
    --batch-per-replica 16
same gpu-keras cpu-keras

# Functional models on the devices: the graph ops of the CUDA table (here the hostdev wrappers)
# and BatchNormalization's moving statistics, added per replica and folded in on each device
# behind the all-reduce, before the optimizer. resblock_k3: Conv2D, BatchNormalization, Add,
# GlobalAveragePooling2D; gradcheck_k2: ZeroPadding2D, strided Conv2D, BN (twice, one on Dense
# units), Add, Dropout, Multiply, Concatenate, AveragePooling2D, GlobalMaxPooling2D and tanh,
# gelu, elu and softmax layers. The weights hold the moving mean and variance, and the epoch
# line's test loss is the inference forward with them. SGD: the sums' order differs (above).
# syncbn_k3: three synchronized BN layers (statistics over the global batch: the devices in
# lockstep, their sums through the host and MPI). gradcheck_vit: KerasHub's ViT layers (the
# class token's copies and sums, the attention, x[:, 0]'s crop) with dropout.
for g in resblock_k3 gradcheck_k2 syncbn_k3 gradcheck_vit; do
    gm=$src/tests/data/keras/graph/$g.json
    run gpu-1x2-$g 1 2 "$hd" --device gpu --model "$gm" "${sgd[@]}"
    run cpu-1x2-$g 1 0 "$mw" --device cpu --model "$gm" --replicas-per-worker 2 --threads 1 \
        "${sgd[@]}"
    same gpu-1x2-$g cpu-1x2-$g
    run gpu-2x1-$g 2 2 "$hd" --device gpu --model "$gm" "${sgd[@]}"
    run cpu-2x1-$g 2 0 "$mw" --device cpu --model "$gm" --threads 1 "${sgd[@]}"
    same gpu-2x1-$g cpu-2x1-$g
done
# A BN model's replica slice is never cut into device micro-batches (at most 1024 examples
# otherwise): 1100 examples on one fake GPU normalize by the statistics one CPU replica
# takes. Cut in two, the weights after 2 steps differ by 2.3e-5 relative (momentum 0.99 moves
# the moving statistics slowly, so 1e-4 cannot tell); whole, by 6e-8: hence 1e-6.
big=(--model "$src/tests/data/keras/graph/resblock_k3.json" --batch-per-replica 1100
     --steps-per-epoch 2 --test-examples 100 --optimizer sgd --learning-rate 0.05)
run gpu-bn-slice 1 1 "$hd" --device gpu "${big[@]}"
run cpu-bn-slice 1 0 "$mw" --device cpu --threads 1 "${big[@]}"
check 'diff -q "$tmp/gpu-bn-slice.epoch" "$tmp/cpu-bn-slice.epoch" >/dev/null &&
       "$cmp" "$tmp/cpu-bn-slice.bin" "$tmp/gpu-bn-slice.bin" 1e-6 >/dev/null' \
    "a BN replica slice of 1100 examples in one device pass: $("$cmp" "$tmp/cpu-bn-slice.bin" \
        "$tmp/gpu-bn-slice.bin" 1e-6)"

# --overlap-allreduce on (worker/replicas/overlap_gpu.h): each bucket of consecutive layers
# all-reduced on the devices' reduce streams once every GPU of the rank has enqueued their last
# backward (the stand-in aborts a collective over memory the compute stream has not released,
# and a kernel on memory a collective writes before the compute stream waits for it): the serial
# path's weights and epoch line bit for bit, with a bucket per layer (--bucket-mb 0), on one rank
# x 2 GPUs, 2 ranks x 1 GPU, 2 replicas per GPU (the buckets in the last micro-batch only), the
# Keras CNN with Dropout and L2 (the regularizers' gradients added per bucket), BatchNormalization
# (its moving statistics in the arena) and KerasHub's Transformer blocks; the default 4 MiB is
# one bucket here. Two fake nodes and synchronized BN fall back, saying why.
# ovl NAME RANKS GPUS FLAGS...: NAME's run (done above with FLAGS) again with the overlap
ovl() {
    local name=$1 n=$2 gpus=$3
    shift 3
    run "$name-ov" "$n" "$gpus" "$hd" --device gpu "$@" --overlap-allreduce on
    local nb
    nb=$(sed -n 's/.*info: overlapped all-reduce: \([0-9]*\) bucket(s) .* on a reduce stream per GPU$/\1/p' \
        "$tmp/$name-ov.out")
    check "[[ -n '$nb' ]] && { [[ '$*' != *'--bucket-mb 0'* ]] || (( ${nb:-0} >= 2 )); }" \
        "$name-ov: buckets on the reduce streams ($nb): $(grep -i 'overlap' "$tmp/$name-ov.out")"
    check "cmp -s '$tmp/$name.bin' '$tmp/$name-ov.bin' && diff -q '$tmp/$name.epoch' \
        '$tmp/$name-ov.epoch' >/dev/null" \
        "$name-ov: not the serial path's bits: $("$cmp" "$tmp/$name.bin" "$tmp/$name-ov.bin" 0)"
}
ovl gpu-1x2 1 2 "${sgd[@]}" --bucket-mb 0
ovl gpu-2x1-sgd 2 2 "${sgd[@]}" --bucket-mb 0
ovl gpu-1x2-rep4 1 2 "${sgd8[@]}" --replicas-per-worker 4 --bucket-mb 0
ovl gpu-keras 1 2 --model "$cnn" --batch-per-replica 16 --bucket-mb 0
ovl gpu-keras 1 2 --model "$cnn" --batch-per-replica 16
ovl gpu-2x1-resblock_k3 2 2 --model "$src/tests/data/keras/graph/resblock_k3.json" "${sgd[@]}" \
    --bucket-mb 0
ovl gpu-1x2-tokblk 1 2 --data "$tmp/tok.npz" --model "$tmp/tokblk.json" \
    --loss-config "$tmp/tok-loss.json" "${sgd[@]}" --bucket-mb 0
# 33 examples in steps of 32: the second step's one example leaves GPU 1 without a backward
# (its buckets, with its L2 gradients, are complete at once)
odd=(--data "$tmp/odd.npz" --model "$tmp/odd.json" --epochs 2 --test-examples 8 "${sgd[@]}")
run gpu-1x2-odd 1 2 "$hd" --device gpu "${odd[@]}"
ovl gpu-1x2-odd 1 2 "${odd[@]}" --bucket-mb 0
TFC=$two_nodes run gpu-2nodes-ov 2 2 "$hd" --device gpu --batch-per-replica 8 --overlap-allreduce on
check 'grep -qF "warning: --overlap-allreduce on: not used here (across nodes the sums go through the host ring after the backward; --gpu-allreduce nccl overlaps them)" "$tmp/gpu-2nodes-ov.out" && cmp -s "$tmp/gpu-2nodes-x2.bin" "$tmp/gpu-2nodes-ov.bin"' \
    "two fake nodes: the overlap not used, and why: $(grep -i overlap "$tmp/gpu-2nodes-ov.out")"
# --gpu-allreduce nccl: one NCCL communicator over both fake nodes' GPUs (no host ring) trains
# like the CPU's 4 replicas (the sums in another order: within 1e-4), says so, and with it the
# buckets overlap across nodes too, bit for bit
TFC=$two_nodes run gpu-2nodes-flat 2 2 "$hd" --device gpu --batch-per-replica 8 --gpu-allreduce nccl
check 'grep -qF "info: gradients across nodes: one NCCL communicator over every GPU (--gpu-allreduce nccl)" \
    "$tmp/gpu-2nodes-flat.out" && grep -qF "gradients across nodes: NCCL inside each node, the MPI ring between nodes through host memory (--gpu-allreduce hierarchical)" "$tmp/gpu-2nodes-x2.out"' \
    "the start-up line names the cross-node all-reduce: $(grep -h "across nodes" "$tmp"/gpu-2nodes-*.out)"
same gpu-2nodes-flat cpu-1x4
TFC=$two_nodes ovl gpu-2nodes-flat 2 2 --batch-per-replica 8 --gpu-allreduce nccl --bucket-mb 0
run gpu-1x2-syncbn-ov 1 2 "$hd" --device gpu --model "$src/tests/data/keras/graph/syncbn_k3.json" \
    "${sgd[@]}" --overlap-allreduce on
check 'grep -qF "not used here (synchronized BatchNormalization steps the devices in lockstep)" \
    "$tmp/gpu-1x2-syncbn-ov.out" && cmp -s "$tmp/gpu-1x2-syncbn_k3.bin" "$tmp/gpu-1x2-syncbn-ov.bin"' \
    "synchronized BN: the overlap not used, and why: $(grep -i overlap "$tmp/gpu-1x2-syncbn-ov.out")"

# the step's shape on the devices (MW_HOSTDEV_STATS): 6 more steps of one rank x 2 fake GPUs
# x 2 replicas each (2 micro-batches per GPU and step) add, per step, no blocking sync, one
# 24-byte metrics download per GPU (loss, count slot, accuracy; never the n x K probabilities) and one polled staging-slot
# wait per micro-batch; the step's end is NCCL's polled wait
stats() { # STEPS: the "hostdev stats" numbers of a run, one per line
    MW_HOSTDEV_STATS=1 MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train --device gpu --epochs 1 \
        --steps-per-epoch "$1" --test-examples 100 --progress none --summary-dir "" \
        --checkpoint-every-epochs 0 --replicas-per-worker 4 --batch-per-replica 16 2>&1 |
        sed -n 's/^hostdev stats: \([0-9]*\) syncs, \([0-9]*\) mark waits, \([0-9]*\) downloads of \([0-9]*\) bytes$/\1 \2 \3 \4/p'
}
read -r s6 w6 d6 b6 <<<"$(stats 6)"
read -r s12 w12 d12 b12 <<<"$(stats 12)"
per="syncs $(((s12 - s6) / 6)), mark waits $(((w12 - w6) / 6)), downloads $(((d12 - d6) / 6)) of $(((b12 - b6) / 6)) bytes"
echo "per GPU step (1 rank x 2 fake GPUs x 2 replicas each): $per"
check '[[ -n $s6 && -n $s12 && $s12 -eq $s6 && $((w12 - w6)) -eq 24 && $((d12 - d6)) -eq 12 &&
       $((b12 - b6)) -eq 384 ]]' "the asynchronous step: $per (6 steps: $s6 $w6 $d6 $b6)"

# checkpoints: 2 epochs straight, or 1 and a resume, on two fake GPUs
# Keras' other optimizers on the GPU path against CPU training: RMSprop with momentum and
# per-tensor clipnorm (a sumsq per tensor on the device), Adam's third slot (amsgrad) with
# global_clipnorm, Adagrad under a warm-up schedule with clipvalue. Rates stay small: the
# replicas' summation order differs between the two, and 12 steps at a large rate (or centered
# RMSprop, whose ms - mg^2 cancels) amplify that beyond 1e-4.
cat >"$tmp/rms.json" <<'JSON'
{"class_name": "RMSprop", "config": {"learning_rate": 0.002, "momentum": 0.5, "clipnorm": 0.5}}
JSON
cat >"$tmp/amsgrad.json" <<'JSON'
{"class_name": "Adam", "config": {"learning_rate": 0.002, "amsgrad": true, "global_clipnorm": 1.0}}
JSON
cat >"$tmp/adagrad.json" <<'JSON'
{"class_name": "Adagrad", "config": {"learning_rate": {"class_name": "CosineDecay", "config":
 {"initial_learning_rate": 0.002, "decay_steps": 8, "warmup_target": 0.01, "warmup_steps": 4}},
 "clipvalue": 0.1}}
JSON
for o in rms amsgrad adagrad; do
    run gpu-1x2-$o 1 2 "$hd" --device gpu --batch-per-replica 16 --optimizer-config "$tmp/$o.json"
    run cpu-1x2-$o 1 0 "$mw" --device cpu --replicas-per-worker 2 --threads 1 \
        --batch-per-replica 16 --optimizer-config "$tmp/$o.json"
    same gpu-1x2-$o cpu-1x2-$o
done

finish
