#!/usr/bin/env bash
# Behaviour unchanged across a refactoring: the same training runs with two mwtrain binaries
# (BEFORE, e.g. built from main before the change, and AFTER) must write cmp-identical
# --dump-weights files. Not a test (it needs two builds); every
# restructuring runs it by hand:
#   tests/bench/same_weights.sh BEFORE_MWTRAIN AFTER_MWTRAIN
# Cases: the built-in tutorial CNN on 1 rank and on 2 ranks, a Functional model with
# BatchNormalization and a residual Add, synchronized BatchNormalization on 2 ranks, and every
# optimizer (SGD with momentum and Nesterov, Adam with AMSGrad, AdamW, RMSprop with momentum,
# Adagrad) with a learning-rate schedule, on Fashion-MNIST (the default data).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
before=$1 after=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --epochs 1 --steps-per-epoch 12 --test-examples 256 --progress none --quiet
        --summary-dir "" --checkpoint-every-epochs 0 --collective-timeout 120 --threads 1)
case_() { # name ranks [flags...]: both binaries, then cmp
    local name=$1 n=$2 b
    shift 2
    for b in before after; do
        local bin=$before
        [[ $b == after ]] && bin=$after
        if ! timeout 300 mpiexec -n "$n" "$bin" "${common[@]}" --checkpoint-dir "$tmp/ck-$b-$name" \
            --dump-weights "$tmp/$b-$name.bin" "$@" >"$tmp/$b-$name.out" 2>&1; then
            check false "$name ($b): $(tail -n 3 "$tmp/$b-$name.out")"
            return
        fi
    done
    check 'cmp -s "$tmp/before-$name.bin" "$tmp/after-$name.bin"' \
        "$name: --dump-weights identical ($(stat -c %s "$tmp/after-$name.bin") bytes)"
}
opt() { # class extra-config: a Keras 3 optimizer config with an ExponentialDecay schedule
    local f=$tmp/opt-$1.json
    printf '{"module": "keras.optimizers", "class_name": "%s", "config": {"learning_rate": %s%s}}\n' \
        "$1" '{"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.01, "decay_steps": 4, "decay_rate": 0.5, "staircase": false}}' \
        "$2" >"$f"
    echo "$f"
}
case_ cnn-1x1 1
case_ cnn-2x1 2
case_ resblock-bn-add 1 --model "$src/tests/data/keras/graph/resblock_k3.json"
case_ syncbn-2x1 2 --model "$src/tests/data/keras/graph/syncbn_k3.json"
case_ sgd-schedule 1 --optimizer-config "$(opt SGD ', "momentum": 0.9, "nesterov": true')"
case_ adam-schedule 1 --optimizer-config "$(opt Adam ', "amsgrad": true')"
case_ adamw-schedule 1 --optimizer-config "$(opt AdamW ', "weight_decay": 0.004')"
case_ rmsprop-schedule 1 --optimizer-config "$(opt RMSprop ', "momentum": 0.5, "centered": true')"
case_ adagrad-schedule 1 --optimizer-config "$(opt Adagrad '')"
finish
