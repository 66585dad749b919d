#!/usr/bin/env bash
# Every optimizer's state survives a checkpoint: for SGD (nesterov, weight decay,
# ExponentialDecay), Adam (amsgrad, CosineDecay with warm-up), AdamW (global_clipnorm,
# PolynomialDecay), RMSprop (momentum, centered, clipvalue, PiecewiseConstantDecay), Adagrad
# (clipnorm, InverseTimeDecay) and CosineDecayRestarts, 3 epochs straight and 1 epoch + a
# resume to 3 give bitwise the same weights and the same scheduled learning rate in
# metrics.csv (the schedule's step is the optimizer's iteration count, in the checkpoint); one
# case runs on 2 ranks. Checkpoints written by main before this change (tests/data/
# optimizer_ckpt/main-*, made by its binary: see the README there) still resume as main's
# binary continued them, both on the reference backend (--backend ref: plain C loops whose
# results do not depend on the CPU's vector units, so files made on one x86-64 machine hold on
# any): SGD bitwise over its second epoch; Adam over one step (the 8th, which uses every part
# of the restored state: m, v and the step count in the bias correction) within 3e-7 of the
# largest weight. Adam's moment update is now written as Keras writes it: the two forms differ
# by a few units in the last place of m and v (and 1.0f - 0.999f against Keras' 0.001f is
# 1.3e-5 of v), so the step, at most about 3 x lr = 3e-3, differs by under 1e-8, and the new
# weight rounds to the same float or a neighbour: at most 1 ulp, 2^-23 = 1.2e-7 of the largest
# weight, plus 1e-8 / 0.32 (its size) = 3e-8. The control: the same step with a learning rate
# 10% larger, smaller than a lost step count (t = 1 instead of 8 doubles the step), differs by
# more than 3e-6.
#   test_resume_optimizer.sh MWTRAIN CMP_WEIGHTS [old|other]
# PART old is the checkpoints from before this change alone (meson's 'resume-old-checkpoints',
# in suite 'isa' too), other the rest ('resume-optimizer'); neither: both.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmpw=$2 part=${3:-all}
want() { [[ $part == all || $part == "$1" ]]; }
src=${MW_SRCDIR:?MW_SRCDIR must name the source tree}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$src/tests/data/optimizer_ckpt
quick=(--model "$data/tiny.json" --steps-per-epoch 7 --test-examples 100 --progress none
    --checkpoint-every-epochs 1 --threads 1)

sched() { # class, config
    echo "{\"module\": \"keras.optimizers.schedules\", \"class_name\": \"$1\", \"config\": $2}"
}
opt() { # class, config
    echo "{\"module\": \"keras.optimizers\", \"class_name\": \"$1\", \"config\": $2, \"registered_name\": null}"
}
declare -A cfg
cfg[sgd]=$(opt SGD "{\"learning_rate\": $(sched ExponentialDecay '{"initial_learning_rate": 0.1, "decay_steps": 5, "decay_rate": 0.5}'), \"momentum\": 0.9, \"nesterov\": true, \"weight_decay\": 0.01}")
cfg[adam]=$(opt Adam "{\"learning_rate\": $(sched CosineDecay '{"initial_learning_rate": 0.001, "decay_steps": 20, "warmup_target": 0.01, "warmup_steps": 5}'), \"amsgrad\": true}")
cfg[adamw]=$(opt AdamW "{\"learning_rate\": $(sched PolynomialDecay '{"initial_learning_rate": 0.01, "decay_steps": 15, "power": 2.0}'), \"global_clipnorm\": 0.5}")
cfg[rmsprop]=$(opt RMSprop "{\"learning_rate\": $(sched PiecewiseConstantDecay '{"boundaries": [4, 10, 15], "values": [0.01, 0.005, 0.002, 0.001]}'), \"momentum\": 0.5, \"centered\": true, \"clipvalue\": 0.05}")
cfg[adagrad]=$(opt Adagrad "{\"learning_rate\": $(sched InverseTimeDecay '{"initial_learning_rate": 0.1, "decay_steps": 3, "decay_rate": 0.5}'), \"clipnorm\": 0.1}")
cfg[restarts]=$(opt SGD "{\"learning_rate\": $(sched CosineDecayRestarts '{"initial_learning_rate": 0.1, "first_decay_steps": 4, "m_mul": 0.8}'), \"momentum\": 0.5}")

# the learning_rate column of the last row of DIR/metrics.csv
last_lr() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "learning_rate") c = i } END { print $c }' "$1/metrics.csv"
}
first_lr() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "learning_rate") c = i } NR == 2 { print $c }' "$1/metrics.csv"
}

if want other; then
    for name in sgd adam adamw rmsprop adagrad restarts; do
        d=$tmp/$name
        mkdir -p "$d"
        echo "${cfg[$name]}" >"$d/opt.json"
        run=()
        [[ $name == rmsprop ]] && run=(timeout 300 mpiexec -n 2)
        "${run[@]}" "$mw" train --optimizer-config "$d/opt.json" --epochs 3 "${quick[@]}" \
            --checkpoint-dir "$d/straight" --summary-dir "$d/logs-a" --dump-weights "$d/a.bin" \
            >"$d/a.out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]]' "$name: 3 epochs straight: $(tail -n 2 "$d/a.out")"
        "${run[@]}" "$mw" train --optimizer-config "$d/opt.json" --epochs 1 "${quick[@]}" \
            --checkpoint-dir "$d/split" --summary-dir "$d/logs-b" >"$d/b.out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 && -f $d/split/ckpt-1 ]]' "$name: 1 epoch: $(tail -n 2 "$d/b.out")"
        "${run[@]}" "$mw" train --optimizer-config "$d/opt.json" --epochs 3 --resume "${quick[@]}" \
            --checkpoint-dir "$d/split" --summary-dir "$d/logs-c" --dump-weights "$d/c.bin" \
            >"$d/c.out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]] && grep -q "restoring .*ckpt-1" "$d/c.out"' \
            "$name: resume to 3 epochs: $(tail -n 2 "$d/c.out")"
        "$cmpw" "$d/a.bin" "$d/c.bin" >"$d/cmp.out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]]' \
            "$name: resumed weights bitwise equal to the straight run: $(cat "$d/cmp.out")"
        check '[[ -n $(last_lr "$d/logs-c") && $(last_lr "$d/logs-a") == "$(last_lr "$d/logs-c")" ]]' \
            "$name: the same learning rate after epoch 3 ($(last_lr "$d/logs-a") vs $(last_lr "$d/logs-c"))"
        check '[[ $(first_lr "$d/logs-a") != "$(last_lr "$d/logs-a")" ]]' \
            "$name: the schedule moved the rate ($(first_lr "$d/logs-a") then $(last_lr "$d/logs-a"))"
    done

    # a checkpoint that lacks a slot the configured optimizer needs: one message, exit 5
    echo '{"class_name": "Adam", "config": {"amsgrad": true}}' >"$tmp/amsgrad.json"
    "$mw" train --optimizer adam --epochs 1 "${quick[@]}" --checkpoint-dir "$tmp/plain" \
        --summary-dir "" >/dev/null 2>&1
    "$mw" train --optimizer-config "$tmp/amsgrad.json" --epochs 2 --resume "${quick[@]}" \
        --checkpoint-dir "$tmp/plain" --summary-dir "" >"$tmp/ams.out" 2>&1
    rc=$?
    check '[[ $rc -eq 5 ]] && grep -q "error: the latest checkpoint has no optimizer state for adam with amsgrad (3 slot(s) needed)" "$tmp/ams.out"' \
        "adam checkpoint resumed with amsgrad: exit 5 naming the missing state (got $rc: $(grep error "$tmp/ams.out"))"
    "$mw" train --optimizer rmsprop --epochs 2 --resume "${quick[@]}" --checkpoint-dir "$tmp/plain" \
        --summary-dir "" >"$tmp/rms.out" 2>&1
    rc=$?
    check '[[ $rc -eq 5 ]] && grep -q "error: the latest checkpoint was written with --optimizer adam; this run uses rmsprop" "$tmp/rms.out"' \
        "adam checkpoint resumed as rmsprop: exit 5 (got $rc: $(grep error "$tmp/rms.out"))"
fi

if want old; then
    # checkpoints from before this change (main at 5ede941), continued on the reference backend
    # and compared with main's own continuation of them (tests/data/optimizer_ckpt/README.md);
    # sets cmp_rc to cmp_weights' exit status (0 within TOL, 1 beyond it; 2: not compared)
    old_ckpt() { # NAME EXPECTED-FILE TOL [flags...]
        local name=$1 expected=$2 tol=$3 d=$tmp/main-$1
        shift 3
        cmp_rc=2
        rm -rf "$d"
        cp -r "$data/main-${name%%-*}" "$d"
        "$mw" train --backend ref --epochs 2 --resume "${quick[@]}" "$@" --checkpoint-dir "$d" \
            --summary-dir "" --dump-weights "$d/now.bin" >"$d/out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]] && grep -q "restoring .*ckpt-1" "$d/out"' \
            "main's $name checkpoint resumes: $(tail -n 2 "$d/out")"
        echo "not compared: the resume failed" >"$d/cmp.out"
        [[ $rc -eq 0 ]] || return 0
        "$cmpw" "$data/$expected" "$d/now.bin" "$tol" >"$d/cmp.out" 2>&1
        cmp_rc=$?
        cat "$d/cmp.out"
    }
    old_ckpt sgd main-sgd-epoch2-ref.bin 0 --optimizer sgd --learning-rate 0.05
    check '[[ $cmp_rc -eq 0 ]]' \
        "main's sgd checkpoint continues as main did, bitwise: $(cat "$tmp/main-sgd/cmp.out")"
    old_ckpt adam main-adam-step8-ref.bin 3e-7 --optimizer adam --steps-per-epoch 1
    check '[[ $cmp_rc -eq 0 ]]' \
        "main's adam checkpoint continues as main did, within 3e-7: $(cat "$tmp/main-adam/cmp.out")"
    old_ckpt adam-lr main-adam-step8-ref.bin 3e-6 --optimizer adam --steps-per-epoch 1 \
        --learning-rate 0.0011
    check '[[ $cmp_rc -eq 1 ]]' \
        "the control, lr 10% larger, differs by more than 3e-6: $(cat "$tmp/main-adam-lr/cmp.out")"
fi
finish
