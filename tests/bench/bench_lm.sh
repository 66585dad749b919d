#!/usr/bin/env bash
# Training throughput of a causal language model (the GPT benchmark model), mwtrain against
# Keras 3 on TensorFlow and on JAX and against PyTorch 2 on the same machine: the GPT of
# tests/bench/peer_keras_lm.py (4 post-norm Transformer blocks of width 128, 4 heads, ff 512,
# context 128, byte vocabulary; Adam 1e-3; global batch 32), the same .keras model for mwtrain
# and Keras, the same architecture written in PyTorch and Hugging Face transformers' GPT-2 of
# the same sizes (GPT2LMHeadModel from a GPT2Config, ReLU, sdpa attention: pre-norm where this
# GPT is post-norm, the same matrix work), both tests/bench/peer_torch_lm.py, the same random
# byte windows, 2 cores. Rounds alternate the programs so drift hits all alike; prints the
# medians in tokens/s, the ratios (to each peer and to the fastest), and the matrix work's
# GFLOP/s against the sgemm ceiling bench_gemm measures in every round too (its median; the
# matrix work per token: 3 x the forward's 2 x (4 D^2 + 2 D F + 2 T D) per block + 2 D V for
# the head, attention's full T x T).
#   bench_lm.sh MWTRAIN [rounds=3] [steps=40]
# The peers' environments are made under the build directory: tests/keras/venv.sh (Keras on
# JAX), tests/bench/tf_venv.sh (Keras on TensorFlow), tests/bench/torch_venv.sh (PyTorch); a
# peer whose environment cannot be made is reported as skipped.
set -euo pipefail
mwtrain=$1 rounds=${2:-3} steps=${3:-40}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(readlink -f "$mwtrain")")")}
jaxpy=$(bash "$src/tests/keras/venv.sh" "$build" 2>/dev/null) || jaxpy=
tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build" 2>/dev/null) || tfpy=
torchpy=$(bash "$src/tests/bench/torch_venv.sh" "$build" 2>/dev/null) || torchpy=
if [[ -z $jaxpy ]]; then
    echo "bench_lm: no Keras environment (tests/keras/venv.sh failed)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
. "$src/tests/bench/lm_lib.sh"
export JAX_PLATFORMS=cpu
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-lm-XXXXXX")
trap 'rm -rf "$work"' EXIT
peer=$src/tests/bench/peer_keras_lm.py
KERAS_BACKEND=jax "$jaxpy" "$peer" save "$work/gpt.keras" >&2
# the KerasHub GPT benchmark model (KerasHub's blocks), for mwtrain and Keras on TensorFlow and
# on JAX
KERAS_BACKEND=jax "$jaxpy" "$peer" save "$work/hub.keras" --hub >&2
KERAS_BACKEND=jax "$jaxpy" "$peer" data "$work/d.npz" --examples $((32 * steps))
flags=(--model "$work/gpt.keras" --data "$work/d.npz" --epochs 2 --progress none --quiet
       --checkpoint-every-epochs 0 --summary-dir "" --test-examples 32
       --checkpoint-dir "$work/ck")
echo "bench_lm: $(uptime)"
one=() two=() tf=() jx=() pt=() hf=() ceil=() hub=() jxh=() tfh=()
for ((r = 1; r <= rounds; r++)); do
    # epoch 2 of 2 is steady state (epoch 1 includes the first touch of every buffer)
    one+=("$("$mwtrain" train "${flags[@]}" --batch-per-replica 32 --threads 2 | tps)")
    two+=("$(mpirun --oversubscribe -n 2 "$mwtrain" train "${flags[@]}" --batch-per-replica 16 \
        --threads 1 | tps)")
    [[ -n $tfpy ]] && tf+=("$(KERAS_BACKEND=tensorflow "$tfpy" "$peer" time "$work/gpt.keras" \
        "$work/d.npz" --steps "$steps" 2>/dev/null | num tokens_per_sec)")
    jx+=("$(KERAS_BACKEND=jax "$jaxpy" "$peer" time "$work/gpt.keras" "$work/d.npz" \
        --steps "$steps" 2>/dev/null | num tokens_per_sec)")
    [[ -n $torchpy ]] && pt+=("$("$torchpy" "$src/tests/bench/peer_torch_lm.py" "$work/d.npz" \
        --threads 2 --steps "$steps" | num tokens_per_sec)")
    [[ -n $torchpy ]] && hf+=("$("$torchpy" "$src/tests/bench/peer_torch_lm.py" "$work/d.npz" \
        --model gpt2-hf --threads 2 --steps "$steps" 2>/dev/null | num tokens_per_sec)")
    hub+=("$("$mwtrain" train "${flags[@]}" --model "$work/hub.keras" --batch-per-replica 32 \
        --threads 2 | tps)")
    jxh+=("$(KERAS_BACKEND=jax "$jaxpy" "$peer" time "$work/hub.keras" "$work/d.npz" \
        --steps "$steps" 2>/dev/null | num tokens_per_sec)")
    [[ -n $tfpy ]] && tfh+=("$(KERAS_BACKEND=tensorflow "$tfpy" "$peer" time "$work/hub.keras" \
        "$work/d.npz" --steps "$steps" 2>/dev/null | num tokens_per_sec)")
    ceil+=("$("$build/tests/bench/bench_gemm" 2 10 | num ceiling_gflops)")
    echo "round $r: mwtrain 1 x 2 threads ${one[-1]}, mpirun -n 2 ${two[-1]}," \
        "keras-tf $(last "${tf[@]}"), keras-jax ${jx[-1]}, pytorch $(last "${pt[@]}")," \
        "transformers gpt-2 $(last "${hf[@]}") tokens/s;" \
        "KerasHub's model: mwtrain ${hub[-1]}, keras-tf $(last "${tfh[@]}"), keras-jax ${jxh[-1]};" \
        "sgemm ceiling ${ceil[-1]} GFLOP/s"
done
# matrix work per token, training (forward x 3), D 128, F 512, T 128, V 256, 4 blocks
flop=$(awk 'BEGIN {D = 128; F = 512; T = 128; V = 256; print 3 * (4 * 2 * (4 * D * D + 2 * D * F + 2 * T * D) + 2 * D * V)}')
m1=$(median "${one[@]}") m2=$(median "${two[@]}") j=$(median "${jx[@]}") ceiling=$(median "${ceil[@]}")
t=$(median "${tf[@]}") p=$(median "${pt[@]}") g2=$(median "${hf[@]}")
printf 'causal LM (4 x TransformerDecoder, width 128, context 128), batch 32, median of %d rounds:\n' "$rounds"
printf '  mwtrain, 1 rank x 2 threads    %7.0f tokens/s  %s Keras-TF, %s PyTorch, %s Keras-JAX  (%s)\n' \
    "$m1" "$(ratio "$m1" "$t")" "$(ratio "$m1" "$p")" "$(ratio "$m1" "$j")" "$(gf "$m1")"
printf '  mwtrain, mpirun -n 2           %7.0f tokens/s  %s Keras-TF, %s PyTorch, %s Keras-JAX  (%s)\n' \
    "$m2" "$(ratio "$m2" "$t")" "$(ratio "$m2" "$p")" "$(ratio "$m2" "$j")" "$(gf "$m2")"
printf '  keras 3, tensorflow            %7.0f tokens/s  (%s)\n' "$t" "$(gf "$t")"
printf '  keras 3, jax                   %7.0f tokens/s  (%s)\n' "$j" "$(gf "$j")"
printf '  pytorch %-22s %7.0f tokens/s  (%s)\n' "" "$p" "$(gf "$p")"
printf '  transformers GPT-2 (pre-norm)  %7.0f tokens/s  (%s)  mwtrain / it: %s, -n 2: %s\n' \
    "$g2" "$(gf "$g2")" "$(ratio "$m1" "$g2")" "$(ratio "$m2" "$g2")"
fastest "$m1" "$m2" "$t Keras on TensorFlow" "$j Keras on JAX" "$p PyTorch" \
    "$g2 transformers GPT-2"
h=$(median "${hub[@]}") hj=$(median "${jxh[@]}") ht=$(median "${tfh[@]}")
printf "  KerasHub's TransformerDecoder x 4 (+ TokenAndPositionEmbedding): mwtrain 1 x 2 threads %.0f tokens/s (%s); %s Keras-TF (%.0f), %s Keras-JAX (%.0f) on the same archive\n" \
    "$h" "$(gf "$h")" "$(ratio "$h" "$ht")" "$ht" "$(ratio "$h" "$hj")" "$hj"
printf '  sgemm ceiling (bench_gemm, 2 threads, median of the rounds) %.1f GFLOP/s; matrix work %.2f MFLOP per token\n' \
    "$ceiling" "$(awk -v f="$flop" 'BEGIN {print f / 1e6}')"
echo "bench_lm: $(uptime)"
