#!/usr/bin/env bash
# mixed_bfloat16 on the CPU against float32, on the same machine in one run:
#   accuracy:   the tutorial CNN on Fashion-MNIST, 10 epochs (global batch 64, Adam), over
#               SEEDS seeds each; prints each run's test accuracy and whether bfloat16's lie
#               within the spread (min..max) of float32's;
#   throughput: images/s of epoch 2 of 2 (STEPS steps), rounds alternating float32,
#               mixed_bfloat16 and, where tests/bench/tf_venv.sh can make its venv,
#               TensorFlow's mixed_bfloat16 and float32 (tests/bench/peer_tf.py); medians
#               and ratios.
#
#   bench_bf16.sh MWTRAIN accuracy|throughput|both [SEEDS=3] [ROUNDS=3] [STEPS=300]
#
# Exit 77 (skip, with mwtrain's reason) where mwtrain refuses mixed_bfloat16 (no AVX512_BF16
# or AMX, or ONEDNN_MAX_CPU_ISA below it).
set -uo pipefail
mw=${1:?usage: bench_bf16.sh MWTRAIN accuracy|throughput|both [SEEDS] [ROUNDS] [STEPS]}
what=${2:-both} seeds=${3:-3} rounds=${4:-3} steps=${5:-300}
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$(dirname "$mw")/.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --progress none --summary-dir "" --checkpoint-every-epochs 0 --threads 2)
if ! msg=$("$mw" "${common[@]}" --epochs 0 --dtype-policy mixed_bfloat16 2>&1); then
    echo "SKIP: ${msg##*error: }"
    exit 77
fi
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { sed -n "s|.*$1: \([0-9.]*\).*|\1|p" | tail -n 1; }

if [[ $what == accuracy || $what == both ]]; then
    declare -A acc
    for pol in float32 mixed_bfloat16; do
        for ((s = 1; s <= seeds; s++)); do
            out=$("$mw" "${common[@]}" --epochs 10 --seed "$s" --dtype-policy "$pol" 2>&1 | tail -n 1)
            a=$(field "Test Accuracy" <<<"$out")
            acc[$pol]+="$a "
            echo "accuracy: $pol seed $s: test accuracy $a ($out)"
        done
    done
    read -r -a f <<<"${acc[float32]}"
    read -r -a b <<<"${acc[mixed_bfloat16]}"
    lo=$(printf '%s\n' "${f[@]}" | sort -g | head -1) hi=$(printf '%s\n' "${f[@]}" | sort -g | tail -1)
    inside=$(printf '%s\n' "${b[@]}" | awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 <= hi {n++} END {print n + 0}')
    echo "accuracy after 10 epochs: float32 ${f[*]} (spread $lo..$hi); mixed_bfloat16 ${b[*]}:" \
        "$inside of ${#b[@]} inside float32's spread; medians $(median "${f[@]}") vs $(median "${b[@]}")"
fi

if [[ $what == throughput || $what == both ]]; then
    py=$(bash "$here/tf_venv.sh" "$build" 2>/dev/null) || py=""
    [[ -n $py ]] || echo "throughput: no TensorFlow venv (tests/bench/tf_venv.sh failed): mwtrain only"
    declare -A ips
    for ((r = 1; r <= rounds; r++)); do
        for pol in float32 mixed_bfloat16; do
            v=$("$mw" "${common[@]}" --epochs 2 --steps-per-epoch "$steps" --dtype-policy "$pol" \
                --test-examples 64 2>&1 | tail -n 1 | field "Images/s")
            ips[mw_$pol]+="$v "
            if [[ -n $py ]]; then
                t=$("$py" "$here/peer_tf.py" --policy "$pol" --threads 2 --steps "$steps" 2>/dev/null |
                    sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p')
                ips[tf_$pol]+="$t "
            fi
        done
        printf 'round %d (images/s):' "$r"
        for k in mw_float32 mw_mixed_bfloat16 tf_float32 tf_mixed_bfloat16; do
            [[ -n ${ips[$k]:-} ]] && printf ' %s %s' "$k" "$(awk '{print $NF}' <<<"${ips[$k]}")"
        done
        echo
    done
    m32=$(median ${ips[mw_float32]}) m16=$(median ${ips[mw_mixed_bfloat16]})
    printf 'throughput, tutorial CNN, batch 64, 2 threads, median of %d rounds (images/s):\n' "$rounds"
    printf '  mwtrain float32         %8.0f\n  mwtrain mixed_bfloat16  %8.0f  (%.2fx float32)\n' \
        "$m32" "$m16" "$(awk -v a="$m16" -v b="$m32" 'BEGIN {print a / b}')"
    if [[ -n $py && -n ${ips[tf_float32]:-} ]]; then
        t32=$(median ${ips[tf_float32]}) t16=$(median ${ips[tf_mixed_bfloat16]})
        printf '  TensorFlow float32      %8.0f\n  TensorFlow mixed_bf16   %8.0f  (%.2fx its float32)\n' \
            "$t32" "$t16" "$(awk -v a="$t16" -v b="$t32" 'BEGIN {print a / b}')"
        printf '  mwtrain / TensorFlow: float32 %.2fx, mixed_bfloat16 %.2fx\n' \
            "$(awk -v a="$m32" -v b="$t32" 'BEGIN {print a / b}')" \
            "$(awk -v a="$m16" -v b="$t16" 'BEGIN {print a / b}')"
    fi
fi
