#!/usr/bin/env bash
# --cuda-graphs on without a GPU: the GPU backend's graph cache (worker/replicas/gpu_graphs.c) on
# the fake devices of tests/hostdev.c, which record a capture's calls with their arguments as
# they are then (the structures they point at copied) and replay them on each launch, the step's
# dropout seed read at the replay where the CUDA kernels read it from the device. A token model
# of KerasHub's TransformerEncoder and TransformerDecoder with dropout (the attention's
# probabilities and the blocks' Dropout layers: masks that change every step); a replica's
# slice is one micro-batch (a GPU runs it at once), the staging slots alternate, each epoch ends
# with a shorter step (330 examples, global batches of 40: another shape, another scale) and
# an evaluation (forward-only graphs). Asserted:
#   - graphs on train the same bits as graphs off (weights and epoch lines), 1 rank x 2 GPUs,
#     2 replicas per GPU, 2 ranks x 1 GPU, and with --overlap-allreduce on (the last backward
#     of a step outside the graph, its buckets posted as it goes);
#   - the graphs were used: the closing line of each device counts replayed micro-batches;
#   - the negative control: replays that keep the seed of the step they were captured in
#     (MW_HOSTDEV_GRAPH=frozen, as kernels taking it by value would) train other weights;
#   - a capture that fails (MW_HOSTDEV_GRAPH=fail) says so in one line and trains the same bits,
#     its micro-batch launched kernel by kernel.
#   test_hostdev_graphs.sh HOSTDEV_MODULE MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/hostdev_common.sh"

/usr/bin/python3 - "$tmp" "$src/tests/cuda" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import token_models
import numpy as np
r = np.random.default_rng(11)
tok = r.integers(0, 50, size=(370, 12)).astype(np.uint16)
for i, n in enumerate(r.integers(4, 13, size=370)):
    tok[i, n:] = 0
y = (tok[:, 0] % 3).astype(np.int32)
np.savez(sys.argv[1] + "/tok.npz", x_train=tok[:330], y_train=y[:330], x_test=tok[330:],
         y_test=y[330:])
json.dump(token_models.blocks("blocks", 0.3), open(sys.argv[1] + "/blocks.json", "w"))
json.dump({"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": True}},
          open(sys.argv[1] + "/loss.json", "w"))
PY
# every epoch's line (hostdev_common.sh's run keeps the first)
epoch_re=${epoch_re/Epoch 1,/Epoch [0-9]*,}
quick=(--epochs 2 --test-examples 40 --progress none --summary-dir ""
       --checkpoint-every-epochs 0 --collective-timeout 60)
tab=(--data "$tmp/tok.npz" --model "$tmp/blocks.json" --loss-config "$tmp/loss.json"
     --optimizer adam --learning-rate 0.01 --batch-per-replica 20)
# bits NAME-A NAME-B: the same epoch lines and bitwise equal weights
bits() {
    check "diff -q '$tmp/$1.epoch' '$tmp/$2.epoch' >/dev/null" \
        "$1 vs $2: epoch lines '$(tr '\n' ' ' <"$tmp/$1.epoch")' vs '$(tr '\n' ' ' <"$tmp/$2.epoch")'"
    check "'$cmp' '$tmp/$1.bin' '$tmp/$2.bin' 0 >/dev/null" \
        "$1 vs $2 bitwise: $("$cmp" "$tmp/$1.bin" "$tmp/$2.bin" 0)"
}
# replayed NAME: every device's closing line counts replays from at least one graph
replayed() {
    local lines
    lines=$(grep -E "CUDA device [0-9]+: [0-9]+ micro-batches replayed from [0-9]+ CUDA graphs" \
        "$tmp/$1.out")
    check '[[ -n $lines ]] && ! grep -qE ": 0 micro-batches replayed| from 0 CUDA graphs| off" \
        <<<"$lines"' "$1 replayed its micro-batches from graphs: $(tr '\n' ' ' <<<"$lines")"
}

for layout in "1x2:1 2" "rpd2:1 1 --replicas-per-worker 2" "2x1:2 2" \
    "ovl:1 2 --overlap-allreduce on --bucket-mb 0"; do
    name=${layout%%:*}
    read -r -a args <<<"${layout#*:}"
    run "$name-off" "${args[@]:0:2}" "$hd" --device gpu "${tab[@]}" "${args[@]:2}"
    run "$name-on" "${args[@]:0:2}" "$hd" --device gpu "${tab[@]}" "${args[@]:2}" \
        --cuda-graphs on
    bits "$name-off" "$name-on"
    replayed "$name-on"
done
check 'grep -qF "info: CUDA graphs on: a micro-batch shape" "$tmp/1x2-on.out"' \
    "the start-up line says graphs are on: $(grep -F "CUDA graphs on" "$tmp/1x2-on.out")"
check '! grep -qF "CUDA graphs" "$tmp/1x2-off.out"' "graphs off by default say nothing"

# the negative control: a seed kept from the capture draws the captured step's masks again
MW_HOSTDEV_GRAPH=frozen run frozen 1 2 "$hd" --device gpu "${tab[@]}" --cuda-graphs on
replayed frozen
check "! '$cmp' '$tmp/1x2-off.bin' '$tmp/frozen.bin' 1e-6 >/dev/null" \
    "frozen seeds train other weights: $("$cmp" "$tmp/1x2-off.bin" "$tmp/frozen.bin" 1e-6)"

# a capture that fails: one line per device, then the kernels one by one, the same bits
MW_HOSTDEV_GRAPH=fail run fail 1 2 "$hd" --device gpu "${tab[@]}" --cuda-graphs on
bits 1x2-off fail
check '[[ $(grep -c "CUDA graphs off (the host stand-in refused it (MW_HOSTDEV_GRAPH=fail)); its kernels are launched one by one" "$tmp/fail.out") -eq 2 ]]' \
    "a failed capture turns graphs off once per device: $(grep -F "graphs off" "$tmp/fail.out")"
check 'grep -qE "CUDA device 0: 0 micro-batches replayed from 0 CUDA graphs, [0-9]+ launched kernel by kernel \(graphs turned off\)" "$tmp/fail.out"' \
    "its closing line: $(grep -F "micro-batches replayed" "$tmp/fail.out" | head -1)"
finish
