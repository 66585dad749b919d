#!/usr/bin/env bash
# --attention-memory recompute: the attention's probabilities are not kept from the forward; the
# backward runs each example's attention forward again. Asserted, against the default (store):
#   - the same weights, bitwise, after Adam steps, on 1 and on 2 threads and on the reference
#     backend: KerasHub's TransformerEncoder (dropout 0.1 on its probabilities: the hash of
#     each example's id) and TransformerDecoder (causal), Llama's blocks (grouped-query heads,
#     rotary positions), and a MultiHeadAttention under Embedding(mask_zero=True) padding masks
#     with padded steps (the masks' rows per example), under mpirun -n 2 too;
#   - the memory estimate (--verbose's line) is smaller by the probabilities: for a GPT of
#     context 256, 2 blocks of 4 heads, 16 examples, two layers' 15 examples' 4 x 256 x 256
#     floats (30 MiB, less one example's heads' outputs);
#   - control: another learning rate gives other weights (the comparison can fail);
#   - a bad value is one error naming the flag's choices.
#   test_attention_memory.sh MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=(--epochs 1 --progress none --summary-dir "" --checkpoint-every-epochs 0
       --collective-timeout 120 --optimizer adam --seed 5)

# token ids (48, 12) with padded tails (0) every third row, and a class each, as .npy
python3 - "$tmp/tok" "$src/tests/bench" <<'PY' || { echo "FAIL: no token data"; exit 1; }
import os, random, sys
sys.path.insert(0, sys.argv[2])
from gpt_data import save_npy
g = random.Random(3)
os.makedirs(sys.argv[1])
for part, n in (("train", 48), ("test", 16)):
    x = [[g.randrange(1, 50) for _ in range(12)] for _ in range(n)]
    for i in range(0, n, 3):
        x[i][8:] = [0] * 4
    save_npy(os.path.join(sys.argv[1], "x_%s.npy" % part), x)
    save_npy(os.path.join(sys.argv[1], "y_%s.npy" % part), [[g.randrange(3)] for _ in range(n)])
PY

# run NAME MODE ARGS...: train, keep NAME.bin and NAME.out
run() {
    local name=$1 mode=$2
    shift 2
    "$@" --attention-memory "$mode" --dump-weights "$tmp/$name.bin" >"$tmp/$name.out" 2>&1
}
same() { # same A B WHAT: bitwise equal weights
    check "[[ -s $tmp/$1.bin ]] && cmp -s $tmp/$1.bin $tmp/$2.bin" \
        "$3: recompute's weights equal store's bitwise ($("$cmp" "$tmp/$1.bin" "$tmp/$2.bin" 1 2>&1 | tail -n 1; tail -n 1 "$tmp/$2.out"))"
}

graph=$src/tests/data/keras/graph
for model in gradcheck_transformer gradcheck_llama; do
    for th in 1 2; do
        args=("$mw" train --model "$graph/$model.json" --steps-per-epoch 3 --batch-per-replica 64
              --test-examples 64 --threads "$th" "${quick[@]}")
        run "$model-$th-s" store "${args[@]}"
        run "$model-$th-r" recompute "${args[@]}"
        same "$model-$th-s" "$model-$th-r" "$model, $th thread(s)"
    done
    args=("$mw" train --model "$graph/$model.json" --steps-per-epoch 2 --batch-per-replica 8
          --test-examples 8 --backend ref "${quick[@]}")
    run "$model-ref-s" store "${args[@]}"
    run "$model-ref-r" recompute "${args[@]}"
    same "$model-ref-s" "$model-ref-r" "$model, --backend ref"
done
masked=$src/tests/fuzz/corpus/keras/mha_masked_ops.json
args=(mpirun -n 2 "$mw" train --model "$masked" --data "$tmp/tok" --batch-per-replica 8
      --test-examples 16 "${quick[@]}" --epochs 2)
run masked-s store "${args[@]}"
run masked-r recompute "${args[@]}"
same masked-s masked-r "MultiHeadAttention under padding masks, mpirun -n 2"

# the estimate (--verbose's line: activations in MiB with one decimal) falls by the
# probabilities: a GPT of 2 blocks of 4 heads, context 256 (tests/bench/gpt_data.py), 1 thread
# of 16 examples: 2 x (16 - 1) x 4 x 256 x 256 floats, less the one example's heads' outputs the
# second forward writes (2 x 256 x 32 floats)
python3 "$src/tests/bench/gpt_data.py" "$tmp/gpt" --blocks 2 --width 32 --heads 4 --ff 64 \
    --context 256 --vocab 32 --examples 64 || echo "FAIL: gpt_data.py"
act() { sed -n 's/.*(activations \([0-9.]*\) MiB for 1 thread x 16 examples.*/\1/p' "$tmp/$1.out" | head -n 1; }
args=("$mw" train --model "$tmp/gpt/gpt.json" --data "$tmp/gpt/tokens" --steps-per-epoch 1
      --batch-per-replica 16 --test-examples 16 --threads 1 --verbose "${quick[@]}")
run est-s store "${args[@]}"
run est-r recompute "${args[@]}"
a=$(act est-s) b=$(act est-r)
want=$(awk 'BEGIN { printf "%.4f", (2 * 15 * 4 * 256 * 256 - 2 * 256 * 32) * 4 / 1048576 }')
check '[[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" -v w="$want" '"'"'BEGIN { d = a - b - w; exit !(d < 0.11 && d > -0.11) }'"'"'' \
    "the memory estimate falls by the probabilities: activations store $a MiB, recompute $b MiB, want $want MiB less"
same est-s est-r "the GPT of context 256"

# control: the comparison can fail
run ctl recompute "$mw" train --model "$graph/gradcheck_transformer.json" --steps-per-epoch 3 \
    --batch-per-replica 64 --test-examples 64 --threads 1 "${quick[@]}" --learning-rate 0.002
check '[[ -s $tmp/ctl.bin ]] && ! cmp -s "$tmp/ctl.bin" "$tmp/gradcheck_transformer-1-r.bin"' \
    "control: another learning rate gives other weights"

out=$("$mw" train --attention-memory keep --epochs 0 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "attention-memory" <<<"$out" && grep -q "store" <<<"$out" && grep -q "recompute" <<<"$out"' \
    "a bad value: exit $rc, one message naming the choices: $out"
finish
