#!/usr/bin/env bash
# Training speed on real vision models: keras.applications' ResNet50 and MobileNetV2
# (weights=None, classes=10) at 32x32 and 96x96 inputs, batch 32 per replica, SGD(0.01), the
# same random uint8 images for all; mwtrain as 1 process x 2 threads and as `mpirun -n 2` x 1
# thread (global batch 64), against Keras 3.15 `fit` on TensorFlow 2.21 (intra-op 2) and
# PyTorch 2 (torch.set_num_threads(2)) running the archive's own graph (peer_torch_zoo.py: the
# Keras architecture exactly, not torchvision's ResNet v1.5), one process each, batch 32. Rounds
# alternate the programs so drift hits all alike; the sgemm ceiling (bench_gemm, 2 threads) is
# measured in every round too. Prints the medians in images/s after warm-up (epoch 2 of 2 of
# STEPS steps for every program), the ratios, and each run's matrix work in GFLOP/s and its share
# of the ceiling (peer_keras_zoo.py counts the work per image). A model mwtrain refuses is
# reported as "refused: <mwtrain's message>" in its rows and the rest goes on.
#   bench_zoo_speed.sh MWTRAIN [rounds=3] [steps=10] [MODEL:SIZE ...]
#   (default ResNet50:32 ResNet50:96 MobileNetV2:32 MobileNetV2:96; `MWTRAIN 1 5` is the
#   quick run). Needs tests/bench/tf_venv.sh's venv (77 without); PyTorch's
#   (tests/bench/torch_venv.sh) is reported as skipped when it cannot be made.
set -euo pipefail
mwtrain=$1 rounds=${2:-3} steps=${3:-10}
cells=("${@:4}")
((${#cells[@]})) || cells=(ResNet50:32 ResNet50:96 MobileNetV2:32 MobileNetV2:96)
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(readlink -f "$mwtrain")")")}
if ! tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build"); then
    echo "bench_zoo_speed: no Keras-on-TensorFlow environment (tests/bench/tf_venv.sh failed)" >&2
    exit 77
fi
torchpy=$(bash "$src/tests/bench/torch_venv.sh" "$build") || torchpy=
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
export TF_CPP_MIN_LOG_LEVEL=3
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-zoo-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "load average $(cut -d ' ' -f 1-3 /proc/loadavg) on $(nproc) CPUs: the numbers mean" \
    "something only on an otherwise idle machine"
kpeer=$src/tests/bench/peer_keras_zoo.py tpeer=$src/tests/bench/peer_torch_zoo.py
num() { sed -n "s/.*$1=\\([0-9.]*\\).*/\\1/p" | tail -n 1; }
declare -A vals note gflop trainable short
for cell in "${cells[@]}"; do
    name=${cell%:*} size=${cell#*:}
    [[ -f $work/d$size.npz ]] || "$tfpy" "$kpeer" data "$work/d$size.npz" --size "$size" \
        --examples $((64 * steps)) 2>/dev/null
    if ! line=$("$tfpy" "$kpeer" save "$name" "$size" "$work/${cell/:/-}.keras" 2>"$work/err"); then
        tail -n 3 "$work/err" >&2
        echo "bench_zoo_speed: Keras could not make $name at ${size}x$size ($cell)" >&2
        exit 1
    fi
    gflop[$cell]=$(num train_gflop_per_image <<<"$line")
    trainable[$cell]=$(num trainable <<<"$line")
done
[[ -n $torchpy ]] || for cell in "${cells[@]}"; do note[$cell/torch]="skipped: no PyTorch"; done
# run CELL PROG KEY CMD...: the number KEY= (images_per_sec) from CMD's output, or for KEY mwB
# mwtrain's epoch 2 (steps x the global batch B over its Time), or the reason there is none, kept
# in note[] so later rounds skip the pair
run() {
    local cell=$1 prog=$2 key=$3 out v rc=0
    shift 3
    [[ -z ${note[$cell/$prog]:-} ]] || return 0
    out=$("$@" 2>"$work/err") || rc=$?
    if [[ $key == mw* ]]; then # the epoch's images over its Time (Images/s is rounded)
        v=$(sed -n 's/^Epoch 2,.*Time: \([0-9.]*\) s.*/\1/p' <<<"$out" | tail -n 1)
        [[ -z $v ]] ||
            v=$(awk -v t="$v" -v n="$((steps * ${key#mw}))" 'BEGIN {printf "%.2f", n / t}')
    else
        v=$(num "$key" <<<"$out")
    fi
    if ((rc == 0)) && [[ -n $v ]]; then
        vals[$cell/$prog]+=" $v"
    elif [[ $key == mw* ]] && ((rc == 2)); then # the model is refused: mwtrain says why
        v=$(grep -m 1 '^mwtrain: error: ' "$work/err" || true)
        v=${v#mwtrain: error: }
        note[$cell/$prog]="refused: ${v//$work\//}"
    else
        v=$(grep -v '^[[:space:]]*$' "$work/err" | tail -n 1 || true)
        note[$cell/$prog]="failed (exit $rc): $v"
    fi
    v=$(num trainable <<<"$out")
    if [[ $prog == torch && $rc == 0 && $v != "${trainable[$cell]}" ]]; then
        note[$cell/$prog]="failed: $v trainable parameters, Keras ${trainable[$cell]}"
    fi
    return 0
}
# the round's number of PROG for the cell, or the first word of why there is none
show() {
    local v=(${vals[$cell/$1]:-})
    echo "${v[r - 1]:-${note[$cell/$1]%%:*}}"
}
ceil=()
for ((r = 1; r <= rounds; r++)); do
    for cell in "${cells[@]}"; do
        size=${cell#*:}
        # epoch 2 of 2 is steady state (epoch 1 includes the first touch of every buffer)
        flags=(--model "$work/${cell/:/-}.keras" --data "$work/d$size.npz" --batch-per-replica 32
            --epochs 2 --steps-per-epoch "$steps" --progress none --quiet
            --checkpoint-every-epochs 0 --summary-dir "" --test-examples 32
            --checkpoint-dir "$work/ck")
        run "$cell" mw1 mw32 "$mwtrain" train "${flags[@]}" --threads 2
        run "$cell" mw2 mw64 mpirun --oversubscribe -n 2 "$mwtrain" train "${flags[@]}" --threads 1
        run "$cell" keras images_per_sec "$tfpy" "$kpeer" time "$work/${cell/:/-}.keras" \
            "$work/d$size.npz" --batch 32 --steps "$steps" --threads 2
        [[ -z $torchpy ]] || run "$cell" torch images_per_sec "$torchpy" "$tpeer" \
            "$work/${cell/:/-}.keras" "$work/d$size.npz" --batch 32 --steps "$steps" --threads 2
        echo "round $r, $cell: mwtrain 1 x 2 threads $(show mw1), mpirun -n 2 $(show mw2)," \
            "keras-tf $(show keras), pytorch $(show torch) images/s"
    done
    ceil+=("$("$build/tests/bench/bench_gemm" 2 10 | num ceiling_gflops)")
    echo "round $r: sgemm ceiling ${ceil[-1]} GFLOP/s"
done
median() {
    printf '%s\n' "$@" | sort -g |
        awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
ceiling=$(median "${ceil[@]}")
printf '\nkeras.applications training speed, batch 32 per replica, %d steps, %s\n' \
    "$steps" "median of $rounds rounds"
printf '(images/s after warm-up; GFLOP/s of the matrix work; sgemm ceiling %.1f GFLOP/s)\n' \
    "$ceiling"
declare -A label=([mw1]="mwtrain, 1 x 2 threads" [mw2]="mwtrain, mpirun -n 2 x 1"
    [keras]="keras 3, tensorflow" [torch]="pytorch") short=([keras]=Keras-TF [torch]=PyTorch)
for cell in "${cells[@]}"; do
    declare -A med=()
    for p in mw1 mw2 keras torch; do
        if [[ -z ${note[$cell/$p]:-} ]]; then med[$p]=$(median ${vals[$cell/$p]}); fi
    done
    printf '%s %sx%s (%.3f GFLOP per training image):\n' "${cell%:*}" "${cell#*:}" "${cell#*:}" \
        "${gflop[$cell]}"
    for p in mw1 mw2 keras torch; do
        if [[ -n ${note[$cell/$p]:-} ]]; then
            printf '  %-26s %s\n' "${label[$p]}" "${note[$cell/$p]}"
            continue
        fi
        x=${med[$p]} rel=
        for q in keras torch; do
            if [[ $p == mw* && -n ${med[$q]:-} ]]; then
                rel+=$(awk -v a="$x" -v b="${med[$q]}" -v q="${short[$q]}" \
                    'BEGIN {printf "  %.2fx %s", a / b, q}')
            fi
        done
        g=$(awk -v x="$x" -v g="${gflop[$cell]}" 'BEGIN {print x * g}')
        printf '  %-26s %8.1f images/s  %6.1f GFLOP/s %4.0f%% of the ceiling%s\n' "${label[$p]}" \
            "$x" "$g" "$(awk -v g="$g" -v c="$ceiling" 'BEGIN {print 100 * g / c}')" "$rel"
    done
done
echo "(mpirun -n 2 trains a global batch of 64, the others 32; PyTorch runs the archive's own"
echo " graph: Keras' ResNet v1 with the stride on the 1x1 and biased convolutions, not"
echo " torchvision's v1.5)"
# The ceiling the convolutions set: bench_conv_engines (where oneDNN 2 built it) times ResNet50's
# convolutions alone on one thread, a rank's share of mpirun -n 2; a step that were nothing else
# would run 2 x 32 images in that time
conv=$build/tests/bench/bench_conv_engines
for cell in "${cells[@]}"; do
    [[ ${cell%:*} == ResNet50 && -x $conv ]] || continue
    line=$("$conv" "${cell#*:}" 3 32 | tail -n 1)
    mw=$(num mwtrain_ms <<<"$line") best=$(num best_ms <<<"$line")
    k=$(median ${vals[$cell/keras]:-0})
    awk -v c="$cell" -v mw="$mw" -v b="$best" -v k="$k" 'BEGIN {
        printf "%s, its convolutions alone on one thread per rank (bench_conv_engines): mwtrain'"'"'s\n", c
        printf "  kernels %.0f ms per 32 images, oneDNN'"'"'s fastest per layer %.0f ms; a step of nothing else:\n", mw, b
        printf "  mpirun -n 2 at most %.1f images/s on these kernels, %.1f on oneDNN'"'"'s", 64000 / mw, 64000 / b
        if (k > 0) printf " (%.2fx / %.2fx Keras-TF)", 64000 / mw / k, 64000 / b / k
        printf "\n"
    }'
done
