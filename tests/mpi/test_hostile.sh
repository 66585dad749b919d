#!/usr/bin/env bash
# Hostile inputs through the command line (docs/commands.md, "Untrusted files"): for each class of
# defect, the exit code, the one message, and that nothing outside the target was read or written.
#   1. a FIFO where an input belongs (--data .npz, x_train.npy, an IDX file, --model JSON and
#      .keras, --optimizer-config, --tf-config, tf-config --hostfile): exit 4 within seconds,
#      naming the FIFO; a writer blocked on the FIFO is still blocked afterwards (nothing opened
#      it for reading);
#   2. a .keras whose weights reach a host file (HDF5 external storage, an external link, a
#      virtual dataset; the file is a FIFO, so reading it would hang): exit 3 naming the
#      variable and the file, the FIFO never opened;
#   3. compressed inputs past the memory limit: tests/mpi/test_memory.sh part 5 (a cgroup);
#   4. export --output onto a FIFO and onto a device node (mknod, root): exit 2, the node still
#      what it was, nothing written, no temporary file; onto a full file system (a 64 KiB
#      tmpfs, root with mount rights, else skipped with the reason): exit 4 naming --output and
#      "No space left on device", the old file intact, no temporary file;
#   5. --optimizer-config of 1 GiB (sparse): exit 2 within seconds naming its size, nothing read;
#      a hostfile line of 5000 bytes: exit 2 naming the file and line;
#   6. x_train.npy truncated while 2 ranks train on it: exit 3 and the line naming the file
#      (SIGBUS, 135, before);
#   7. <summary-dir>/metrics.csv a symbolic link to a file outside: exit 4, the file unchanged;
#   8. --dump-weights /dev/full: exit 2 before training; onto the full tmpfs: exit 4 with the
#      reason;
#   9. a stray label (200 in a 3-class set): the warning naming the classes without a training
#      example.
# Every input is made here (numpy, and test_keras_h5 --case for the HDF5 weights); every run
# is under a timeout; the FIFO writers, the tmpfs and the files are removed on every exit.
#   test_hostile.sh MWTRAIN TEST_KERAS_H5
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
h5case=$(realpath "$2")
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skip: $py has no numpy (Debian package python3-numpy, deploy/setup.sh)"
    exit 77
fi
unset MW_MEMORY_CHECK
tmp=$(mktemp -d)
full=""
probes=()
cleanup() {
    for p in "${probes[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [[ -n $full ]] && umount "$full" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
quick=(--epochs 1 --steps-per-epoch 2 --progress none --summary-dir '' --checkpoint-every-epochs 0
       --batch-per-replica 4 --threads 1 --collective-timeout 60)

# tiny.npz: 2x2x1 images, labels 0..2; stray.npz: the same with one label 200; npy/: a
# directory of .npy files of 20000 28x28 images; mlp.json / mlp3.json / mlp201.json: Flatten
# and Dense(10 | 3 | 201) over 28x28x1 or 2x2x1
"$py" - "$tmp" <<'EOF'
import json, os, sys
import numpy as np
t = sys.argv[1]
r = np.random.default_rng(26)
x, xt = r.integers(0, 256, (16, 2, 2)).astype(np.uint8), r.integers(0, 256, (4, 2, 2)).astype(np.uint8)
y, yt = (np.arange(16) % 3).astype(np.uint8), (np.arange(4) % 3).astype(np.uint8)
np.savez(os.path.join(t, "tiny.npz"), x_train=x, y_train=y, x_test=xt, y_test=yt)
ys = y.astype(np.int64)
ys[5] = 200
np.savez(os.path.join(t, "stray.npz"), x_train=x, y_train=ys, x_test=xt, y_test=yt)
os.mkdir(os.path.join(t, "npy"))
for name, a in (("x_train", r.integers(0, 256, (20000, 28, 28))), ("y_train", r.integers(0, 10, 20000)),
                ("x_test", r.integers(0, 256, (100, 28, 28))), ("y_test", r.integers(0, 10, 100))):
    np.save(os.path.join(t, "npy", name + ".npy"), a.astype(np.uint8))
def mlp(side, units):
    return {"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": [
        {"module": "keras.layers", "class_name": "InputLayer",
         "config": {"batch_shape": [None, side, side, 1], "name": "in"}},
        {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "f"}},
        {"module": "keras.layers", "class_name": "Dense", "config": {"name": "d", "units": units}}]}}
for name, side, units in (("mlp", 28, 10), ("mlp3", 2, 3), ("mlp201", 2, 201)):
    with open(os.path.join(t, name + ".json"), "w") as f:
        json.dump(mlp(side, units), f)
EOF

# probe FIFO: a writer that blocks until something opens FIFO for reading; probe_untouched
# says whether it is still blocked (nothing opened the FIFO), then ends it.
probe() {
    (exec 3>"$1" && echo opened >&3) 2>/dev/null &
    probes+=($!)
}
probe_untouched() {
    local p=${probes[-1]} alive=1
    kill -0 "$p" 2>/dev/null || alive=0
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    ((alive))
}

# run NAME LIMIT ARGS...: mwtrain ARGS under a timeout; rc and took set, output in NAME.out/err
run() {
    local name=$1 lim=$2
    shift 2
    local t0
    t0=$(now)
    timeout -s KILL "$lim" "$mw" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    took=$(secs "$t0" "$(now)")
}

# --- 1. a FIFO where an input belongs: exit 4, never opened ------------------------------------
mkdir -p fifo/npy fifo/idx
mkfifo fifo/data.npz fifo/npy/x_train.npy fifo/idx/train-images-idx3-ubyte fifo/m.json \
    fifo/m.keras fifo/opt.json fifo/tf.json fifo/hosts
for f in y_train.npy x_test.npy y_test.npy; do cp npy/$f fifo/npy/; done
touch fifo/idx/train-labels-idx1-ubyte fifo/idx/t10k-images-idx3-ubyte fifo/idx/t10k-labels-idx1-ubyte
fifo_case() { # NAME FIFO mwtrain-args...
    local name=$1 f=$2
    shift 2
    probe "$f"
    run "fifo-$name" 30 "$@"
    echo "1 $name: exit $rc in $took s: $(grep -m1 error "$tmp/fifo-$name.err")"
    check '[[ $rc -eq 4 ]]' "FIFO as $name: exit 4 (got $rc)"
    check 'awk -v t="$took" "BEGIN { exit !(t < 10) }"' "FIFO as $name: within 10 s (took $took s)"
    check 'grep -qF -- "$f: is a FIFO, not a regular file" "$tmp/fifo-$name.err"' \
        "FIFO as $name: the message names the FIFO"
    check '(($(grep -c "error:" "$tmp/fifo-$name.err") == 1))' "FIFO as $name: one message"
    check probe_untouched "FIFO as $name: nothing opened it"
}
fifo_case npz "$tmp/fifo/data.npz" train "${quick[@]}" --data "$tmp/fifo/data.npz"
fifo_case x_train.npy "$tmp/fifo/npy/x_train.npy" train "${quick[@]}" --data "$tmp/fifo/npy"
fifo_case idx "$tmp/fifo/idx/train-images-idx3-ubyte" train "${quick[@]}" --data "$tmp/fifo/idx"
fifo_case model-json "$tmp/fifo/m.json" train "${quick[@]}" --model "$tmp/fifo/m.json"
fifo_case model-keras "$tmp/fifo/m.keras" train "${quick[@]}" --model "$tmp/fifo/m.keras"
fifo_case optimizer-config "$tmp/fifo/opt.json" train "${quick[@]}" \
    --optimizer-config "$tmp/fifo/opt.json"
fifo_case tf-config "$tmp/fifo/tf.json" train "${quick[@]}" --tf-config "$tmp/fifo/tf.json"
fifo_case hostfile "$tmp/fifo/hosts" tf-config --hostfile "$tmp/fifo/hosts"

# --- 2. HDF5 weights that reach a host file: exit 3, never opened ------------------------------
mkfifo host.fifo
h5_case() { # CASE WANT
    local name=$1 want=$2
    if ! "$h5case" --case "$name" "$tmp/$name.keras" "$tmp/host.fifo"; then
        fail=$((fail + 1))
        echo "FAIL: test_keras_h5 --case $name could not write the archive"
        return
    fi
    probe "$tmp/host.fifo"
    run "h5-$name" 30 train "${quick[@]}" --data "$tmp/tiny.npz" --model "$tmp/$name.keras"
    echo "2 $name: exit $rc in $took s: $(grep -m1 error "$tmp/h5-$name.err")"
    check '[[ $rc -eq 3 ]]' "$name: exit 3 (got $rc)"
    check 'grep -qF -- "$tmp/$name.keras: model.weights.h5: $want" "$tmp/h5-$name.err"' \
        "$name: the message names the archive, the variable and what it reaches"
    check probe_untouched "$name: the host file it names was never opened"
}
h5_case external_storage \
    "layer 'd': layers/dense/vars/0 (kernel) keeps its data in the external file '$tmp/host.fifo'"
h5_case external_link_layer "layers/dense is an HDF5 external link to '$tmp/host.fifo:/layers/dense'"
h5_case virtual_dataset "layer 'd': layers/dense/vars/0 (kernel) is a virtual dataset"

# a checkpoint of the tiny model, for export
run ckpt 120 train "${quick[@]}" --data "$tmp/tiny.npz" --model "$tmp/mlp3.json" \
    --checkpoint-dir "$tmp/ck" --checkpoint-every-epochs 1
check '[[ $rc -eq 0 ]]' "a checkpoint to export trains (got $rc: $(grep -m1 error "$tmp/ckpt.err"))"

# --- 4. export --output onto what is not a regular file: exit 2, untouched --------------------
mkdir out
mkfifo out/fifo
probe "$tmp/out/fifo"
run export-fifo 30 export --checkpoint-dir "$tmp/ck" --output "$tmp/out/fifo"
echo "4 fifo: exit $rc: $(grep -m1 error "$tmp/export-fifo.err")"
check '[[ $rc -eq 2 ]]' "export onto a FIFO: exit 2 (got $rc)"
check 'grep -qF -- "--output '"'"'$tmp/out/fifo'"'"': is a FIFO; expected a regular file or a new name" \
    "$tmp/export-fifo.err"' "export onto a FIFO: the message"
check '[[ -p $tmp/out/fifo ]]' "export onto a FIFO: still a FIFO"
check probe_untouched "export onto a FIFO: nothing opened it"
if (($(id -u) == 0)) && mknod "$tmp/out/null" c 1 3 2>/dev/null; then
    for fmt in safetensors keras weights-h5; do
        run "export-dev-$fmt" 30 export --checkpoint-dir "$tmp/ck" --output "$tmp/out/null" \
            --format "$fmt"
        check '[[ $rc -eq 2 ]]' "export $fmt onto a device node: exit 2 (got $rc)"
        check 'grep -qF -- "is a character device; expected a regular file" \
            "$tmp/export-dev-$fmt.err"' "export $fmt onto a device node: the message"
        check '[[ -c $tmp/out/null && $(stat -c %t:%T "$tmp/out/null") == 1:3 ]]' \
            "export $fmt onto a device node: still the same device"
    done
else
    echo "4: device node cases skipped: mknod needs root"
fi
check '[[ -z $(ls "$tmp/out" | grep tmp) ]]' "no temporary file left in out/"

# a full file system: a 64 KiB tmpfs, filled
mkdir full
if (($(id -u) == 0)) && mount -t tmpfs -o size=64k mwtrain-test "$tmp/full" 2>"$tmp/mount.err"; then
    full=$tmp/full
    echo old >"$full/m.keras"
    dd if=/dev/zero of="$full/fill" bs=4k 2>/dev/null
    run export-full 60 export --checkpoint-dir "$tmp/ck" --output "$full/m.keras" --format keras
    echo "4 full disk: exit $rc: $(grep -m1 error "$tmp/export-full.err")"
    check '[[ $rc -eq 4 ]]' "export onto a full disk: exit 4 (got $rc)"
    check 'grep -qF -- "export $full/m.keras: cannot write it: No space left on device" \
        "$tmp/export-full.err"' "export onto a full disk: names --output and the reason"
    check '! grep -q "m\.keras\.tmp" "$tmp/export-full.err"' \
        "export onto a full disk: no temporary file named"
    check '[[ $(cat "$full/m.keras") == old ]]' "export onto a full disk: the old file intact"
    check '[[ -z $(ls "$full" | grep tmp) ]]' "export onto a full disk: no temporary left"
    # --- 8b. --dump-weights onto the full disk: exit 4 with the reason
    run dump-full 60 train "${quick[@]}" --data "$tmp/tiny.npz" --model "$tmp/mlp3.json" \
        --dump-weights "$full/w.bin"
    echo "8 dump onto a full disk: exit $rc: $(grep -m1 error "$tmp/dump-full.err")"
    check '[[ $rc -eq 4 ]]' "--dump-weights onto a full disk: exit 4 (got $rc)"
    check 'grep -qF -- "--dump-weights $full/w.bin: cannot write it: No space left on device" \
        "$tmp/dump-full.err"' "--dump-weights onto a full disk: the reason"
else
    echo "4, 8: full-disk cases skipped: cannot mount a tmpfs ($(cat "$tmp/mount.err" 2>/dev/null))"
fi

# --- 5. sizes: a 1 GiB --optimizer-config, a 5000-byte hostfile line --------------------------
truncate -s 1G opt-huge.json
run opt-huge 30 train "${quick[@]}" --optimizer-config "$tmp/opt-huge.json"
echo "5 optimizer config: exit $rc in $took s: $(grep -m1 error "$tmp/opt-huge.err")"
check '[[ $rc -eq 2 ]]' "1 GiB --optimizer-config: exit 2 (got $rc)"
check 'awk -v t="$took" "BEGIN { exit !(t < 5) }"' "1 GiB --optimizer-config: within 5 s ($took s)"
check 'grep -qF -- "$tmp/opt-huge.json: 1073741824 bytes; expected at most 1048576 (1 MiB)" \
    "$tmp/opt-huge.err"' "1 GiB --optimizer-config: the message names the size"
{
    echo "node-a slots=2"
    printf 'b%.0s' $(seq 1 5000)
    echo " slots=1"
} >hosts-long
run hosts-long 30 tf-config --hostfile "$tmp/hosts-long"
echo "5 hostfile: exit $rc: $(grep -m1 error "$tmp/hosts-long.err")"
check '[[ $rc -eq 2 ]]' "a 5008-byte hostfile line: exit 2 (got $rc)"
check 'grep -qF -- "$tmp/hosts-long:2: a line of 5008 bytes; expected at most 4096" \
    "$tmp/hosts-long.err"' "a long hostfile line: the message names the file and line"

# --- 6. x_train.npy truncated while 2 ranks train: exit 3 naming it ----------------------------
t0=$(now)
timeout -s KILL 120 mpiexec -n 2 "$mw" train --data "$tmp/npy" --model "$tmp/mlp.json" \
    --epochs 100000 --progress none --summary-dir '' --checkpoint-every-epochs 0 \
    --test-examples 100 --threads 1 --collective-timeout 60 >"$tmp/sigbus.out" \
    2>"$tmp/sigbus.err" &
job=$!
for _ in $(seq 1 300); do
    grep -q "^Epoch 1," "$tmp/sigbus.out" 2>/dev/null && break
    sleep 0.1
done
truncate -s 0 "$tmp/npy/x_train.npy"
wait "$job"
rc=$?
echo "6 truncated x_train.npy: exit $rc in $(secs "$t0" "$(now)") s: $(grep -m1 error "$tmp/sigbus.err")"
check 'grep -q "^Epoch 1," "$tmp/sigbus.out"' "it trained before the file was truncated"
check '[[ $rc -eq 3 ]]' "truncated x_train.npy: exit 3 (got $rc; 135 is the bare SIGBUS)"
check 'grep -qF -- "error: $tmp/npy/x_train.npy: the memory-mapped file shrank while it was read" \
    "$tmp/sigbus.err"' "truncated x_train.npy: the message names the file"

# --- 7. metrics.csv a link to a file outside: exit 4, the file unchanged ----------------------
mkdir sum
echo "keep me" >outside.txt
cp outside.txt outside.orig
ln -s "$tmp/outside.txt" sum/metrics.csv
run csv-link 60 train --epochs 1 --steps-per-epoch 2 --progress none --checkpoint-every-epochs 0 \
    --batch-per-replica 4 --threads 1 --data "$tmp/tiny.npz" --model "$tmp/mlp3.json" \
    --summary-dir "$tmp/sum"
echo "7 metrics.csv link: exit $rc: $(grep -m1 error "$tmp/csv-link.err")"
check '[[ $rc -eq 4 ]]' "metrics.csv through a link: exit 4 (got $rc)"
check 'grep -qF -- "summary file $tmp/sum/metrics.csv: is a symbolic link" "$tmp/csv-link.err"' \
    "metrics.csv through a link: the message"
check 'cmp -s "$tmp/outside.txt" "$tmp/outside.orig" && [[ -L $tmp/sum/metrics.csv ]]' \
    "metrics.csv through a link: the file outside unchanged, the link still a link"

# --- 8. --dump-weights /dev/full: exit 2 before training ---------------------------------------
run dump-full-dev 30 train "${quick[@]}" --data "$tmp/tiny.npz" --model "$tmp/mlp3.json" \
    --dump-weights /dev/full
echo "8 /dev/full: exit $rc in $took s: $(grep -m1 error "$tmp/dump-full-dev.err")"
check '[[ $rc -eq 2 ]]' "--dump-weights /dev/full: exit 2 (got $rc)"
check '! grep -q "^Epoch" "$tmp/dump-full-dev.out"' "--dump-weights /dev/full: refused before training"
check 'grep -qF -- "--dump-weights '"'"'/dev/full'"'"': is a character device; expected a regular file" \
    "$tmp/dump-full-dev.err"' "--dump-weights /dev/full: the message"

# --- 9. a stray label: the warning ---------------------------------------------------------------
run stray 60 train "${quick[@]}" --data "$tmp/stray.npz" --model "$tmp/mlp201.json"
echo "9 stray label: exit $rc: $(grep -m1 warning "$tmp/stray.err")"
check '[[ $rc -eq 0 ]]' "a stray label still trains (got $rc: $(grep -m1 error "$tmp/stray.err"))"
check 'grep -qF -- "data $tmp/stray.npz: 197 of the 201 classes have no training example" \
    "$tmp/stray.err"' "a stray label: the warning names the classes without an example"

finish
