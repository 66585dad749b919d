#!/usr/bin/env bash
# Memory checked before it is used (worker/memory.h): flags that do not fit end in set-up with
# exit 6 and the estimate, never in the kernel's OOM killer (137, which deploy scripts retry).
#   1. outside any cgroup, --batch-per-replica 65536 --micro-batch 65536 --threads 2 (28.5 GiB
#      of activations) exits 6 within seconds without growing (peak RSS well under 1 GB);
#      skipped where the machine has that much available (the run would fit there).
#   2. in a 1 GiB memory cgroup, --batch-per-replica 8192 --micro-batch 8192 exits 6, not 137,
#      naming the estimate and the 1.0 GiB limit;
#   3. a normal small run in the same cgroup still trains (exit 0): the check does not refuse
#      what fits;
#   4. MW_MEMORY_CHECK=off skips the check (the run then meets the limit: no exit 6).
#   5. compressed inputs that inflate past the limit, in a 512 MiB cgroup: a 2.7 MB
#      np.savez_compressed .npz holding 599 MiB, a .keras whose model.weights.h5 is padded to
#      599 MiB, and a gzip IDX file of 800000 28x28 images each exit 6 within seconds, with one
#      message naming the file and the size, from the sizes in the zip directory and the IDX
#      header, before anything is inflated; the same .npz with MW_MEMORY_CHECK=off is killed
#      by the OOM killer (137): the control that shows what the check prevents.
# The cgroup is made with cgroup v2 (/sys/fs/cgroup/mwtrain-test-$$, memory.max) or, on a v1 or
# hybrid system, the v1 memory controller (memory.limit_in_bytes); without either, or without
# the rights to make one, parts 2-5 are skipped (exit 77 with the reason). The cgroup is
# removed on every exit, after the processes in it have ended.
#   test_memory.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
unset MW_MEMORY_CHECK
tmp=$(mktemp -d)
cleanup() {
    mw_cgroup_remove
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
# the OOM killer's SIGKILL leaves a singleton's own directory (docs/commands.md): in here
export TMPDIR=$tmp

quick=(--epochs 1 --steps-per-epoch 1 --progress none --summary-dir '' --checkpoint-every-epochs 0)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# --- 1. outside any cgroup --------------------------------------------------------------------
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if ((avail_kb > 27 * 1024 * 1024)); then
    echo "part 1 skipped: $((avail_kb / 1024 / 1024)) GiB available, the 28.5 GiB run would fit"
elif [[ ! -x /usr/bin/time ]]; then
    echo "part 1 skipped: /usr/bin/time (GNU time) is not installed to measure the peak RSS"
else
    t0=$(now)
    timeout -s KILL 120 /usr/bin/time -v -o "$tmp/time1" "$mw" train --batch-per-replica 65536 \
        --micro-batch 65536 --threads 2 "${quick[@]}" >"$tmp/out1" 2>"$tmp/err1"
    rc=$?
    took=$(secs "$t0" "$(now)")
    rss_kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time1")
    echo "part 1: exit $rc in $took s, peak RSS ${rss_kb:-?} kB"
    grep -v "^\s*$" "$tmp/err1" | head -5
    check '[[ $rc -eq 6 ]]' "65536 x 65536, 2 threads: exit 6 (got $rc)"
    check 'awk -v t="$took" "BEGIN { exit !(t < 20) }"' "exit within 20 s (took $took s)"
    check '[[ -n $rss_kb ]] && ((rss_kb < 500 * 1024))' "peak RSS under 500 MB (got $rss_kb kB)"
    check 'grep -q "this run needs about 28.5 GiB" "$tmp/err1"' "message: the estimate"
    check 'grep -q "activations 28.4 GiB for 2 threads x 32768 examples" "$tmp/err1"' \
        "message: the activations broken down"
    # MemAvailable here, or the limit of the cgroup the test itself runs in
    check 'grep -Eq "it may use \((/proc/meminfo: MemAvailable|cgroup v[12] )" "$tmp/err1"' \
        "message: the source of the limit"
fi

# --- a 1 GiB memory cgroup --------------------------------------------------------------------
if ! mw_cgroup_make 1G; then
    echo "SKIP parts 2-5: $mw_cg_skip"
    ((fail)) && exit 1
    exit 77
fi
cg=$mw_cg kind=$mw_cg_kind
echo "cgroup: $cg (1 GiB, $kind)"

# in_cgroup SECONDS OUTFILE ERRFILE mwtrain-args...: run mwtrain inside the cgroup
in_cgroup() {
    local lim=$1 out=$2 err=$3
    shift 3
    timeout -s KILL "$lim" "${mw_cg_exec[@]}" "$mw" "$@" >"$out" 2>"$err"
}

# --- 2. 8192 x 8192 in 1 GiB: exit 6 ----------------------------------------------------------
t0=$(now)
in_cgroup 120 "$tmp/out2" "$tmp/err2" train --batch-per-replica 8192 --micro-batch 8192 \
    "${quick[@]}"
rc=$?
took=$(secs "$t0" "$(now)")
echo "part 2: exit $rc in $took s"
grep -v "^\s*$" "$tmp/err2" | head -5
check '[[ $rc -ne 137 ]]' "not killed by the OOM killer (137)"
check '[[ $rc -eq 6 ]]' "8192 x 8192 in 1 GiB: exit 6 (got $rc)"
check 'awk -v t="$took" "BEGIN { exit !(t < 20) }"' "exit within 20 s (took $took s)"
check 'grep -q "this run needs about [0-9.]* GiB of memory on this rank" "$tmp/err2"' \
    "message: the estimate"
check 'grep -q "activations [0-9.]* GiB for [0-9]* threads\? x [0-9]* examples" "$tmp/err2"' \
    "message: the activations broken down"
check 'grep -q "$kind of /mwtrain-test-$$: limit 1.0 GiB" "$tmp/err2"' \
    "message: the 1.0 GiB limit and its source"
check 'grep -q -- "--micro-batch" "$tmp/err2"' "message: what to change"
check '(($(grep -c "this run needs about" "$tmp/err2") == 1))' "one message"

# --- 3. a normal small run in 1 GiB trains ----------------------------------------------------
t0=$(now)
in_cgroup 300 "$tmp/out3" "$tmp/err3" train --epochs 1 --steps-per-epoch 20 --test-examples 1000 \
    --progress none --summary-dir '' --checkpoint-every-epochs 0 --verbose
rc=$?
echo "part 3: exit $rc in $(secs "$t0" "$(now)") s"
grep "memory:" "$tmp/err3"
check '[[ $rc -eq 0 ]]' "a small run in 1 GiB trains (got $rc: $(grep error "$tmp/err3"))"
check 'grep -q "^Epoch 1, Loss" "$tmp/out3"' "it reports the epoch"
check 'grep -q "memory: about .* per rank (activations .*available to it ($kind" "$tmp/err3"' \
    "--verbose prints the estimate and the limit"

# --- 4. MW_MEMORY_CHECK=off skips the check ---------------------------------------------------
MW_MEMORY_CHECK=off in_cgroup 60 "$tmp/out4" "$tmp/err4" train --batch-per-replica 8192 \
    --micro-batch 8192 "${quick[@]}"
rc=$?
echo "part 4 (MW_MEMORY_CHECK=off): exit $rc"
check '[[ $rc -ne 6 ]] && ! grep -q "this run needs about" "$tmp/err4"' \
    "MW_MEMORY_CHECK=off: no check (got $rc)"

# --- 5. compressed inputs larger than a 512 MiB cgroup: exit 6 before inflating --------------
mw_cgroup_limit 512M
# bomb.npz: np.savez_compressed's layout, x_train (800000, 28, 28) uint8 zeros (599 MiB with
# the rest); padded.keras: a config for 28x28x1, model.weights.h5 an HDF5 signature and 599 MiB
# of zeros; idx/: train-images-idx3-ubyte.gz of 800000 28x28 zero images (only the headers of
# the others, which are never read)
if ! /usr/bin/python3 - "$tmp" <<'EOF'; then
import gzip, os, struct, sys, zipfile
t, n = sys.argv[1], 800000
zero = bytes(1 << 22)
def zeros(f, nbytes):
    while nbytes > 0:
        f.write(zero[:min(nbytes, len(zero))])
        nbytes -= len(zero)
def npy_header(shape):
    d = "{'descr': '|u1', 'fortran_order': False, 'shape': %r, }" % (tuple(shape),)
    d += " " * (63 - (10 + len(d)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()
with zipfile.ZipFile(os.path.join(t, "bomb.npz"), "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    for name, shape in (("x_train", (n, 28, 28)), ("y_train", (n,)), ("x_test", (10, 28, 28)),
                        ("y_test", (10,))):
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(npy_header(shape))
            count = 1
            for s in shape:
                count *= s
            zeros(f, count)
cfg = ('{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": ['
       '{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": '
       '[null, 28, 28, 1], "name": "in"}}, {"module": "keras.layers", "class_name": "Flatten", '
       '"config": {"name": "f"}}, {"module": "keras.layers", "class_name": "Dense", "config": '
       '{"name": "d", "units": 10}}]}}')
with zipfile.ZipFile(os.path.join(t, "padded.keras"), "w", zipfile.ZIP_DEFLATED,
                     compresslevel=1) as z:
    z.writestr("metadata.json", '{"keras_version": "3.6.0"}')
    z.writestr("config.json", cfg)
    with z.open("model.weights.h5", "w", force_zip64=True) as f:
        f.write(b"\x89HDF\r\n\x1a\n")
        zeros(f, 628000000)
os.mkdir(os.path.join(t, "idx"))
with gzip.open(os.path.join(t, "idx", "train-images-idx3-ubyte.gz"), "wb", compresslevel=1) as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28))
    zeros(f, n * 784)
for name, hdr in (("train-labels-idx1-ubyte", struct.pack(">II", 0x801, n)),
                  ("t10k-images-idx3-ubyte", struct.pack(">IIII", 0x803, 10, 28, 28)),
                  ("t10k-labels-idx1-ubyte", struct.pack(">II", 0x801, 10))):
    with open(os.path.join(t, "idx", name), "wb") as f:
        f.write(hdr)
EOF
    echo "FAIL: part 5: /usr/bin/python3 could not write the compressed inputs"
    fail=$((fail + 1))
else
    ls -l "$tmp/bomb.npz" "$tmp/padded.keras" "$tmp/idx/train-images-idx3-ubyte.gz" |
        awk '{ print "part 5 input: " $NF ", " $5 " bytes" }'
    # inflate NAME WANT mwtrain-args...: exit 6 within seconds, one message containing WANT
    inflate() {
        local name=$1 want=$2
        shift 2
        local t0 rc took
        t0=$(now)
        in_cgroup 60 "$tmp/out5-$name" "$tmp/err5-$name" train "${quick[@]}" "$@"
        rc=$?
        took=$(secs "$t0" "$(now)")
        echo "part 5 $name: exit $rc in $took s"
        grep "error" "$tmp/err5-$name"
        check '[[ $rc -eq 6 ]]' "$name in 512 MiB: exit 6 (got $rc)"
        check 'awk -v t="$took" "BEGIN { exit !(t < 20) }"' "$name: exit within 20 s (took $took s)"
        check 'grep -qF -- "$want" "$tmp/err5-$name"' "$name: the message names the file and size"
        check 'grep -q "this process may use ($kind of /mwtrain-test-$$: limit 512.0 MiB" \
            "$tmp/err5-$name"' "$name: the message names the 512 MiB limit"
        check '(($(grep -c "in memory, more than" "$tmp/err5-$name") == 1))' "$name: one message"
    }
    inflate npz "$tmp/bomb.npz: x_train.npy + y_train.npy + x_test.npy + y_test.npy inflate to \
598.9 MiB (628008362 bytes) in memory" --data "$tmp/bomb.npz"
    inflate keras "$tmp/padded.keras: model.weights.h5 inflates to 598.9 MiB (628000008 bytes) \
in memory" --model "$tmp/padded.keras"
    inflate idx "$tmp/idx/train-images-idx3-ubyte.gz: 800000 images of 28x28 take 602.0 MiB \
(631200000 bytes) in memory" --data "$tmp/idx"
    # the control: unchecked, the same archive is inflated into the limit
    t0=$(now)
    MW_MEMORY_CHECK=off in_cgroup 60 "$tmp/out5-off" "$tmp/err5-off" train "${quick[@]}" \
        --data "$tmp/bomb.npz"
    rc=$?
    echo "part 5 control (MW_MEMORY_CHECK=off): exit $rc in $(secs "$t0" "$(now)") s"
    check '[[ $rc -ne 0 && $rc -ne 6 ]]' \
        "control: unchecked, the .npz is not refused but dies (got $rc; 137: the OOM killer)"
fi

finish
