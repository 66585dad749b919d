# Sourced by the fake-GPU training tests (test_hostdev_train.sh, test_hostdev_jobs.sh): their
# arguments, a scratch directory, and the helpers that train and compare.
#   HOSTDEV_MODULE MWTRAIN CMP_WEIGHTS (the tests' arguments)
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
module=$1 mw=$2 cmp=$3
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# mwtrain-hostdev: the same mwtrain binary, with the stand-in module in place of the CUDA one
hd=$tmp/mwtrain-hostdev
printf '#!/bin/sh\nMW_CUDA_MODULE=%q exec %q "$@"\n' "$module" "$mw" >"$hd"
chmod +x "$hd"
unset TF_CONFIG MW_HOSTDEV_GPUS MW_HOSTDEV_FAULT MW_HOSTDEV_SLOW
quick=(--epochs 1 --steps-per-epoch 12 --test-examples 400 --progress none --summary-dir ""
       --checkpoint-every-epochs 0 --collective-timeout 60)
two_nodes='{"cluster":{"worker":["node-a:2222","node-b:2222"]},"task":{"type":"worker","index":0}}'
# the losses and the metrics (one or more, "Name: value, ..." each) of the epoch line
epoch_re='Epoch 1, Loss: [0-9.]*, [A-Za-z]*: [0-9.]*\(, [A-Za-z]*: [0-9.]*\)*, Test Loss: [0-9.]*, Test [A-Za-z]*: [0-9.]*\(, Test [A-Za-z]*: [0-9.]*\)*'

# run NAME RANKS GPUS-PER-PROCESS BINARY FLAGS...: train, dump weights, keep the epoch line
run() {
    local name=$1 n=$2 gpus=$3 bin=$4
    shift 4
    timeout 120 mpiexec -n "$n" -x MW_HOSTDEV_GPUS="$gpus" ${TFC:+-x TF_CONFIG="$TFC"} \
        "$bin" train "${quick[@]}" "$@" --dump-weights "$tmp/$name.bin" >"$tmp/$name.out" 2>&1
    local rc=$?
    sed -n "s/^\\($epoch_re\\),.*/\\1/p" "$tmp/$name.out" >"$tmp/$name.epoch"
    check "[[ $rc -eq 0 && -s $tmp/$name.epoch ]]" \
        "$name trains (exit $rc): $(tail -n 3 "$tmp/$name.out" | tr '\n' ' ')"
}
# same GPU-NAME CPU-NAME: the GPU layout matches the CPU run
same() {
    local g=$tmp/$1 c=$tmp/$2
    check "diff -q '$g.epoch' '$c.epoch' >/dev/null" \
        "$1 vs $2: epoch line differs: '$(cat "$g.epoch")' vs '$(cat "$c.epoch")'"
    check "'$cmp' '$c.bin' '$g.bin' 1e-4 >/dev/null" \
        "$1 vs $2: weights: $("$cmp" "$c.bin" "$g.bin" 1e-4)"
}
stand_in='(CUDA host stand-in'
