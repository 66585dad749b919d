#!/usr/bin/env bash
# Values a file's format allows but training cannot take, refused when the file is read, each
# with its exit code and one message naming the file and the field (before, they reached the
# kernels: a NaN weight ended the run as diverged, exit 8, advising a lower learning rate; a
# loss scale of 5e-324 made 1/S infinite; a finite-step count of INT64_MAX overflowed):
#   1. a .keras whose Dense kernel holds a NaN (test_keras_h5 --nonfinite): exit 3 naming the
#      archive, the layer, the variable and the value's index;
#   2. a checkpoint whose params hold a NaN, and one whose Adam slot holds an infinity (the
#      sections re-encoded here, CRC and all, from docs/checkpoint.md): train --resume and eval
#      exit 5 naming DIR/ckpt-1, the section, the layer and the variable;
#   3. a checkpoint whose lscale record holds a scale of 5e-324, 2^-25 or 2^128, or a finite-step
#      count of INT64_MAX: exit 5, "no valid checkpoint" naming ckpt-1, lscale and the field;
#   4. --optimizer-config and --loss-config with a key written twice (jansson kept the last one
#      silently; the model JSON and TF_CONFIG already refused it): exit 2 naming the file.
# The control: the untouched checkpoint resumes (exit 0).
#   test_bad_values.sh MWTRAIN TEST_KERAS_H5
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
h5=$(realpath "$2")
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skip: $py has no numpy (Debian package python3-numpy, deploy/setup.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 2x2x1 images of 3 classes: the model test_keras_h5 writes (Flatten, Dense(3) named d)
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
r = np.random.default_rng(3)
x = r.normal(size=(40, 2, 2, 1)).astype(np.float32)
y = (np.arange(40) % 3).astype(np.int64)
np.savez(sys.argv[1] + "/d.npz", x_train=x[:32], y_train=y[:32], x_test=x[32:], y_test=y[32:])
PY
cat >"$tmp/m.json" <<'JSON'
{"class_name": "Sequential", "config": {"name": "s", "layers": [
 {"class_name": "InputLayer", "config": {"batch_shape": [null, 2, 2, 1], "name": "in"}},
 {"class_name": "Flatten", "config": {"name": "f"}},
 {"class_name": "Dense", "config": {"name": "d", "units": 3}}]}}
JSON
common=(--data "$tmp/d.npz" --epochs 1 --batch-per-replica 8 --progress none --quiet
        --summary-dir "")

expect() { # name rc-wanted message-part command...
    local name=$1 want_rc=$2 want=$3
    shift 3
    timeout 120 "$@" >"$tmp/$name.out" 2>&1
    local rc=$?
    check '[[ $rc -eq $want_rc ]] && { [[ -z $want ]] || grep -qF -- "$want" "$tmp/$name.out"; }' \
        "$name: exit $want_rc and '$want' (got $rc: $(grep -m1 'error' "$tmp/$name.out"))"
}

# 1. the .keras
"$h5" --nonfinite "$tmp/nan.keras" || echo "FAIL: test_keras_h5 --nonfinite wrote nothing"
expect keras-nan 3 "nan.keras: model.weights.h5: layer 'd': layers/dense/vars/0 (kernel): value 5 of 12 is nan (expected finite weights)" \
    "$mw" train --model "$tmp/nan.keras" "${common[@]}" --checkpoint-every-epochs 0

# 2. and 3. checkpoints: one epoch of Adam saved, then edited
"$mw" train --model "$tmp/m.json" "${common[@]}" --optimizer adam --checkpoint-dir "$tmp/ck" \
    >"$tmp/train.out" 2>&1 || echo "FAIL: the first run: $(tail -n 2 "$tmp/train.out")"
edit() { # case: copy ck to ck-CASE with ckpt-1 edited
    rm -rf "$tmp/ck-$1" && cp -r "$tmp/ck" "$tmp/ck-$1"
    "$py" - "$tmp/ck-$1/ckpt-1" "$1" <<'PY' || echo "FAIL: editing ckpt-1 for $1"
import struct, sys, zlib
path, case = sys.argv[1], sys.argv[2]
b = open(path, "rb").read()
count = struct.unpack_from("<I", b, 12)[0]
secs, off = [], 16
for _ in range(count):
    tag, comp, raw, crc = struct.unpack_from("<8sQQI", b, off)
    off += 28
    secs.append([tag.rstrip(b"\0").decode(), bytearray(zlib.decompress(b[off:off + comp]))])
    off += comp
data = dict(secs)
if case == "params-nan":
    struct.pack_into("<f", data["params"], 0, float("nan"))
elif case == "slot-inf":
    struct.pack_into("<f", data["slot2"], 4 * 13, float("inf"))
elif case != "control":  # the control: re-encoded as it was
    scale, steps = {"scale-tiny": (5e-324, 0), "scale-low": (2.0 ** -25, 0),
                    "scale-high": (2.0 ** 128, 0), "steps-max": (1024.0, 2 ** 63 - 1)}[case]
    secs.append(["lscale", bytearray(struct.pack("<dq", scale, steps))])
out = b[:8] + struct.pack("<II", 1, len(secs))
for tag, raw in secs:
    comp = zlib.compress(bytes(raw))
    out += struct.pack("<8sQQI", tag.encode(), len(comp), len(raw), zlib.crc32(raw)) + comp
open(path, "wb").write(out)
PY
}
resume() { # name rc message-part
    expect "$1" "$2" "$3" "$mw" train --model "$tmp/m.json" "${common[@]}" --optimizer adam \
        --checkpoint-dir "$tmp/ck-$1" --resume --checkpoint-every-epochs 0
}
edit control
resume control 0 ""
edit params-nan
resume params-nan 5 "ck-params-nan/ckpt-1: section params: layer 'd' (Dense) kernel, value 0 of 12, is nan (expected finite weights)"
expect params-nan-eval 5 "ck-params-nan/ckpt-1: section params: layer 'd' (Dense) kernel, value 0 of 12, is nan" \
    "$mw" eval --data "$tmp/d.npz" --checkpoint-dir "$tmp/ck-params-nan"
edit slot-inf
resume slot-inf 5 "ck-slot-inf/ckpt-1: section slot2: layer 'd' (Dense) bias, value 1 of 3, is inf (expected finite optimizer state)"
for c in scale-tiny:4.94066e-324 scale-low:2.98023e-08 scale-high:3.40282e+38; do
    edit "${c%%:*}"
    resume "${c%%:*}" 5 "(tried: ckpt-1 (lscale: loss scale ${c#*:} (expected a power of 2 from 2^-24 to 2^127)))"
done
edit steps-max
resume steps-max 5 "(tried: ckpt-1 (lscale: finite steps 9223372036854775807 (expected 0 to 999999999)))"

# 4. a key twice
printf '{"class_name": "SGD", "config": {"learning_rate": 0.1, "learning_rate": 0.001}}' >"$tmp/o.json"
expect optimizer-dup 2 "o.json: line 1: duplicate object key" \
    "$mw" train --model "$tmp/m.json" "${common[@]}" --optimizer-config "$tmp/o.json"
printf '{"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": true,\n "from_logits": false}}' >"$tmp/l.json"
expect loss-dup 2 "l.json: line 2: duplicate object key" \
    "$mw" train --model "$tmp/m.json" "${common[@]}" --loss-config "$tmp/l.json"
finish
