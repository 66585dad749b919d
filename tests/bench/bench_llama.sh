#!/usr/bin/env bash
# Training throughput of a Llama (grouped-query attention, rotary positions, RMSNorm, SwiGLU),
# mwtrain against the fastest peers on the same machine: KerasHub's LlamaCausalLM of width 256,
# 4 layers, 8 query and 2 key-value heads (head size 32), intermediate (SwiGLU) width 768 (Llama's
# rule: 8/3 of the width rounded up to a multiple of 256), context 256, byte vocabulary 256, untied
# head (3,148,032 parameters), untrained, saved as .keras by tests/bench/peer_keras_lm.py save
# --llama. mwtrain trains that archive (1 rank x 2 threads, and mpirun -n 2 x 1 thread); the
# peers: KerasHub on TensorFlow and on JAX from the same archive (Keras' fit), the same
# architecture written by hand in PyTorch (F.scaled_dot_product_attention with enable_gqa) and
# Hugging Face transformers' LlamaForCausalLM from a LlamaConfig of the same sizes (sdpa), both
# tests/bench/peer_torch_lm.py, eager, 2 threads. Adam(1e-3), global batch 16 (4,096 tokens a step,
# as the GPT of bench_lm.sh), the same random byte windows. Rounds alternate the programs so
# drift hits all alike; prints the medians in tokens/s, GFLOP/s against the sgemm ceiling that
# bench_gemm measures in every round (its best shape; the median over rounds) and the ratios of
# mwtrain to each peer and to the fastest. With MW_BENCH_PEERS=none only mwtrain runs (a quick
# check of mwtrain's own speed).
#
# The matrix work per token (training = 3 x the forward's), D width, Dkv = kv-heads x head size,
# F intermediate, T context, V vocabulary, L layers; attention counted full T x T (as bench_lm.sh,
# the causal half not subtracted):
#   3 x (L x 2 x (2 D^2 [q, out] + 2 D Dkv [k, v] + 3 D F [gate, up, down] + 2 T D [scores,
#   weighted values]) + 2 D V [head])      = 21.6 MFLOP per token at these sizes
#   bench_llama.sh MWTRAIN [rounds=3] [steps=10]
# The peers' environments are made under the build directory: tests/keras/venv.sh (KerasHub on
# JAX, needed), tests/bench/tf_venv.sh (on TensorFlow), tests/bench/torch_venv.sh (PyTorch and
# transformers); a peer whose environment cannot be made is reported as skipped.
set -euo pipefail
mwtrain=$1 rounds=${2:-3} steps=${3:-10}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(readlink -f "$mwtrain")")")}
peers=${MW_BENCH_PEERS:-all}
jaxpy=$(bash "$src/tests/keras/venv.sh" "$build" 2>/dev/null) || jaxpy=
tfpy= torchpy=
if [[ $peers != none ]]; then
    tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build" 2>/dev/null) || tfpy=
    torchpy=$(bash "$src/tests/bench/torch_venv.sh" "$build" 2>/dev/null) || torchpy=
fi
if [[ -z $jaxpy ]]; then
    echo "bench_llama: no Keras environment (tests/keras/venv.sh failed)" >&2
    exit 77
fi
. "$src/tests/lib.sh" # the Open MPI environment (tests/openmpi.env)
. "$src/tests/bench/lm_lib.sh"
export JAX_PLATFORMS=cpu
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-llama-XXXXXX")
trap 'rm -rf "$work"' EXIT
D=256 L=4 H=8 KV=2 F=768 T=256 V=256 batch=16
keras=$src/tests/bench/peer_keras_lm.py
KERAS_BACKEND=jax "$jaxpy" "$keras" save "$work/llama.keras" --llama --blocks $L --width $D \
    --heads $H --kv-heads $KV --ff $F --vocab $V >&2
KERAS_BACKEND=jax "$jaxpy" "$keras" data "$work/d.npz" --named --examples $((batch * steps)) \
    --context $T --vocab $V
flags=(--model "$work/llama.keras" --data "$work/d.npz" --epochs 2 --progress none --quiet
       --checkpoint-every-epochs 0 --summary-dir "" --test-examples 16
       --checkpoint-dir "$work/ck")
kflags=("$work/llama.keras" "$work/d.npz" --batch $batch --steps "$steps")
tflags=("$work/d.npz" --threads 2 --batch $batch --steps "$steps" --blocks $L --width $D
        --heads $H --kv-heads $KV --ff $F --vocab $V)
echo "bench_llama: $(uptime)"
one=() two=() tf=() jx=() pt=() hf=() ceil=() shaped=()
for ((r = 1; r <= rounds; r++)); do
    # epoch 2 of 2 is steady state (epoch 1 includes the first touch of every buffer)
    one+=("$("$mwtrain" train "${flags[@]}" --batch-per-replica $batch --threads 2 | tps)")
    two+=("$(mpirun --oversubscribe -n 2 "$mwtrain" train "${flags[@]}" \
        --batch-per-replica $((batch / 2)) --threads 1 | tps)")
    [[ -n $tfpy ]] && tf+=("$(KERAS_BACKEND=tensorflow "$tfpy" "$keras" time "${kflags[@]}" \
        2>/dev/null | num tokens_per_sec)")
    [[ $peers != none ]] && jx+=("$(KERAS_BACKEND=jax "$jaxpy" "$keras" time "${kflags[@]}" \
        2>/dev/null | num tokens_per_sec)")
    [[ -n $torchpy ]] && pt+=("$("$torchpy" "$src/tests/bench/peer_torch_lm.py" "${tflags[@]}" \
        --model llama | num tokens_per_sec)")
    [[ -n $torchpy ]] && hf+=("$("$torchpy" "$src/tests/bench/peer_torch_lm.py" "${tflags[@]}" \
        --model llama-hf 2>/dev/null | num tokens_per_sec)")
    ceil+=("$("$build/tests/bench/bench_gemm" 2 10 | num ceiling_gflops)")
    [[ -n $torchpy ]] && shaped+=("$("$torchpy" "$src/tests/bench/peer_torch_lm.py" gemm \
        --threads 2 --steps 10 --width $D --ff $F --kv-width $((KV * D / H)) --vocab $V \
        --rows $((batch * T)) | num gemm_gflops)")
    echo "round $r: mwtrain 1 x 2 threads ${one[-1]}, mpirun -n 2 ${two[-1]}," \
        "keras-hub-tf $(last "${tf[@]}"), keras-hub-jax $(last "${jx[@]}")," \
        "pytorch $(last "${pt[@]}"), transformers $(last "${hf[@]}") tokens/s;" \
        "sgemm ceiling ${ceil[-1]} GFLOP/s"
done
flop=$(awk -v D=$D -v L=$L -v KV=$((KV * D / H)) -v F=$F -v T=$T -v V=$V \
    'BEGIN {print 3 * (L * 2 * (2 * D * D + 2 * D * KV + 3 * D * F + 2 * T * D) + 2 * D * V)}')
ceiling=$(median "${ceil[@]}")
m1=$(median "${one[@]}") m2=$(median "${two[@]}")
names=("KerasHub, TensorFlow" "KerasHub, JAX" "PyTorch (by hand)" "transformers Llama")
meds=("$(median "${tf[@]}")" "$(median "${jx[@]}")" "$(median "${pt[@]}")" "$(median "${hf[@]}")")
printf 'Llama (width %d, %d layers, %d query / %d key-value heads, SwiGLU %d, context %d, vocabulary %d), batch %d, median of %d rounds:\n' \
    $D $L $H $KV $F $T $V $batch "$rounds"
printf '  %-34s %7s  %s\n' "program" "tokens/s" "matrix work        mwtrain 1x2 / it, mpirun -n 2 / it"
printf '  %-34s %7.0f  %s\n' "mwtrain, 1 rank x 2 threads" "$m1" "$(gf "$m1")"
printf '  %-34s %7.0f  %s\n' "mwtrain, mpirun -n 2 x 1 thread" "$m2" "$(gf "$m2")"
pairs=()
for i in "${!names[@]}"; do
    pairs+=("${meds[i]} ${names[i]}")
    if [[ ${meds[i]} == 0 ]]; then
        printf '  %-34s skipped\n' "${names[i]}"
        continue
    fi
    printf '  %-34s %7.0f  %s  %s, %s\n' "${names[i]}" "${meds[i]}" "$(gf "${meds[i]}")" \
        "$(ratio "$m1" "${meds[i]}")" "$(ratio "$m2" "${meds[i]}")"
done
fastest "$m1" "$m2" "${pairs[@]}"
printf '  sgemm ceiling (bench_gemm, 2 threads, median of the rounds) %.1f GFLOP/s; matrix work %.2f MFLOP per token\n' \
    "$ceiling" "$(awk -v f="$flop" 'BEGIN {print f / 1e6}')"
if [[ -n $torchpy ]]; then
    g=$(median "${shaped[@]}")
    printf "  at this model's products (4,096 rows; forward, input and weight gradients) PyTorch's torch.mm reaches %.1f GFLOP/s (median of the rounds): mwtrain %.0f%% of it\n" \
        "$g" "$(awk -v x="$m1" -v f="$flop" -v g="$g" 'BEGIN {print 100 * x * f / 1e9 / g}')"
fi
echo "bench_llama: $(uptime)"
