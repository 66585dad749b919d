#!/usr/bin/env bash
# The exit codes of docs/commands.md's table, each produced here through mwtrain's own ending
# (tests/check_exit_codes.py lists, for every row, the tests that produce it), and what the
# messages may quote:
#   - 0 `version`; 1 and 129 MW_FAULT=status (no input reaches them); 4 a missing --data;
#     5 a truncated checkpoint; 7 --device gpu in a build without CUDA;
#   - 2 a loss whose kind of targets is not the data's (CategoricalCrossentropy beside integer
#     labels, the sparse loss beside float32 targets): a configuration error, not bad data;
#     `--loss ""` and `--metrics ""` say what a value is;
#   - untrusted bytes are escaped in every message: an ESC ] 0 ; ... BEL (a terminal's title)
#     and an ESC [ 2 J (clear) in a CSV field (3), a model JSON's layer name (2), an
#     --optimizer-config's and a --loss-config's class_name (2), --loss, --metrics and
#     --optimizer values (2), a checkpoint directory's name (a warning and the error, 5): the
#     message holds \x1b, never the byte.
#   test_exit_codes.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
esc=$'\033]0;pwned\a\033[2J' shown='\x1b]0;pwned\x07\x1b[2J'
# run NAME ARGS...: mwtrain ARGS, its output in $tmp/NAME.out and its exit code in rc
run() {
    local name=$1
    shift
    "$mw" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
# expect NAME CODE TEXT: the last run exited CODE and its output holds TEXT (fixed string)
expect() {
    local out=$tmp/$1.out want=$2 text=$3
    check '[[ $rc -eq $want ]] && grep -qF -- "$text" "$out"' \
        "$1: exit $want and \"$text\" (exit $rc): $(cat -v "$out" | tail -n 3)"
}
# escaped NAME CODE: exit CODE, the message quotes the escape sequence as text, no raw ESC
escaped() {
    local out=$tmp/$1.out want=$2
    check '[[ $rc -eq $want ]] && grep -qF -- "$shown" "$out" && ! grep -q "${esc:0:1}" "$out"' \
        "$1: exit $want, \\x1b quoted and no raw ESC (exit $rc): $(cat -v "$out" | tail -n 2)"
}

run version version
expect version 0 "mwtrain "
MW_FAULT=status:MW_EINTERNAL run internal version
expect internal 1 "mwtrain: error: MW_FAULT=status:MW_EINTERNAL: internal error injected (exit 1)"
MW_FAULT=status:MW_EMPI run mpi version
expect mpi 129 "MW_FAULT=status:MW_EMPI: MPI error injected (exit 129)"
run nodata train --data "$tmp/none"
expect nodata 4 "data $tmp/none: No such file or directory"
if "$mw" version | grep -q "built without CUDA"; then
    run nogpu train --device gpu
    expect nogpu 7 "--device gpu: no CUDA device is available"
fi

# a tabular set of 3 features (integer labels) and a model for it
mkdir -p "$tmp/csv"
printf '0,1,2,3\n1,2,3,4\n2,1,1,1\n' >"$tmp/csv/train.csv"
cp "$tmp/csv/train.csv" "$tmp/csv/test.csv"
sed 's/\[null, 28, 28\]/[null, 3]/g; s/"units": 128/"units": 4/; s/"units": 10/"units": 3/;
     s/\[null, 784\]/[null, 3]/; s/\[null, 128\]/[null, 4]/' \
    "$src/tests/data/keras/mlp_k3.json" >"$tmp/m3.json"
small=(--model "$tmp/m3.json" --epochs 1 --checkpoint-dir "$tmp/ck")
run cce train --data "$tmp/csv" "${small[@]}" --loss categorical_crossentropy
expect cce 2 "CategoricalCrossentropy takes one-hot (or soft) float32 targets (N, K), but $tmp/csv has integer class labels"
# the same features with float32 targets (N, 3), as an .npz written without numpy
python3 - "$tmp/float.npz" <<'EOF'
import io, struct, sys, zipfile
def npy(shape, values):
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % \
        "".join("%d, " % d for d in shape)
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + \
        struct.pack("<%df" % len(values), *values)
x = [1, 2, 3, 2, 3, 4, 1, 1, 1]
y = [1, 0, 0, 0, 1, 0, 0, 0, 1]
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for part in ("train", "test"):
        z.writestr("x_%s.npy" % part, npy((3, 3), x))
        z.writestr("y_%s.npy" % part, npy((3, 3), y))
EOF
run sparse train --data "$tmp/float.npz" "${small[@]}"
expect sparse 2 "SparseCategoricalCrossentropy takes integer class labels, but $tmp/float.npz has float32 targets (3 per example)"
run noloss train --loss ""
expect noloss 2 "--loss: expected a Keras loss name (e.g. sparse_categorical_crossentropy, mse"
run nometrics eval --metrics ""
expect nometrics 2 "--metrics: expected Keras metric names, comma-separated (e.g. accuracy"

# a checkpoint cut short: 5
run ckpt train --data "$tmp/csv" "${small[@]}"
check '[[ $rc -eq 0 && -f $tmp/ck/ckpt-1 ]]' "a one-epoch run on the CSV (exit $rc): $(tail -n 2 "$tmp/ckpt.out")"
truncate -s 100 "$tmp/ck/ckpt-1"
run badckpt eval --checkpoint-dir "$tmp/ck" --data "$tmp/csv"
expect badckpt 5 "no valid checkpoint in $tmp/ck (tried: ckpt-1 (truncated"
# the same in a directory whose name holds the sequence: the warning (a log line) and the
# error both quote it escaped
cp -r "$tmp/ck" "$tmp/ck$esc"
run logesc eval --checkpoint-dir "$tmp/ck$esc" --data "$tmp/csv"
escaped logesc 5
expect logesc 5 "warning: checkpoint $tmp/ck$shown/ckpt-1 is unusable"

# untrusted bytes in messages
mkdir -p "$tmp/esc"
printf '0,1,2,3\n1,2,x%s,4\n' "$esc" >"$tmp/esc/train.csv"
cp "$tmp/csv/test.csv" "$tmp/esc/test.csv"
run csvesc train --data "$tmp/esc" "${small[@]}"
escaped csvesc 3
expect csvesc 3 "train.csv: line 2: field 3: found 'x$shown'; expected a number"
sed 's/"name": "dense"/"name": "d\\u001b]0;pwned\\u0007\\u001b[2J"/' \
    "$src/tests/data/keras/mlp_k3.json" >"$tmp/esc.json"
run jsonesc summary --model "$tmp/esc.json"
escaped jsonesc 2
printf '{"class_name": "Ad\\u001b]0;pwned\\u0007\\u001b[2Jam", "config": {}}' >"$tmp/opt.json"
run optesc train --optimizer-config "$tmp/opt.json"
escaped optesc 2
printf '{"class_name": "X\\u001b]0;pwned\\u0007\\u001b[2J", "config": {}}' >"$tmp/loss.json"
run lossesc train --loss-config "$tmp/loss.json"
escaped lossesc 2
for flag in --loss --metrics --optimizer; do
    run "flag$flag" train "$flag" "x$esc" "${small[@]}" --data "$tmp/csv"
    escaped "flag$flag" 2
done
finish
