#!/usr/bin/env bash
# Memory checked from shapes, before anything that large is allocated (worker/memory.h,
# common/sysmem.h). In a 512 MiB memory cgroup, each run below ends at once with its exit code
# and one message, never in the OOM killer (137), with a peak RSS under 64 MiB (GNU time):
#   1. train of a model declaring 10.2 G parameters (4 KB of JSON; Dense layers of 16384 units,
#      on a 4-feature CSV set, then on the default data set, refused before it is loaded): exit 6,
#      the estimate naming the model as what takes the most;
#   2. summary of the same model: its table (exit 0): a summary counts from shapes and
#      allocates no weights;
#   3. a 2 GiB text corpus (--sequence-length; a sparse file): exit 6 from its size, before
#      anything is read;
#   4. a 2 GiB train.csv (119 M lines of 7 features): exit 6 after the reader's counting pass,
#      which holds one 1 MiB buffer;
#   5. a 3 MB checkpoint whose sections inflate to 3 GiB (eval): exit 6 from the sizes its meta
#      section gives, before inflating; its control (MW_MEMORY_CHECK=off) is refused by the
#      kernel (137), or fails to allocate (6 without the checkpoint's message);
#   6. export of a small checkpoint whose model declares the 10.2 G parameters: exit 6 from the
#      model's shapes, nothing written.
# Outside the cgroup, the limits met later are checked at start:
#   7. a model of 268.7 M parameters, over the checkpoint format's 2^28, with the memory check
#      off: train exits 2 naming the limit before anything is allocated (with checkpoints off,
#      in the cgroup, it is not refused for that but meets the memory: exit 6);
#   8. PositionEmbedding(sequence_length=1048576) on 1040 features: exit 2 naming the layer and
#      the per-tensor cap;
#   9. the 10.2 G model with MW_MEMORY_CHECK=off, where the kernel refuses an allocation larger
#      than the machine (vm.overcommit_memory 0 or 2): exit 6, the message naming the parameter
#      count and the largest layer.
# Without a memory cgroup (not root, no memory controller) parts 1-6 are skipped: exit 77 with
# the reason, after 7-9. The cgroup and the large files are removed on every exit.
#   test_memory_budget.sh MWTRAIN
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
RSS_MAX_KB=$((64 * 1024))

# big.json: Input(4) -> 39 x Dense(16384) -> Dense(3), 10.2 G parameters; over.json: Input(4) ->
# Dense(4096) -> Dense(65536) -> Dense(3), 268.7 M; posemb.json: Embedding(256, 1040) into
# PositionEmbedding(sequence_length=1048576); csv/: 4 features, labels 0..2
/usr/bin/python3 - <<'EOF' || exit 1
import json, os
def seq(layers, shape):
    first = {"module": "keras.layers", "class_name": "InputLayer",
             "config": {"batch_shape": [None] + shape, "name": "in"}}
    return {"module": "keras", "class_name": "Sequential",
            "config": {"name": "s", "layers": [first] + layers}}
def dense(name, units):
    return {"module": "keras.layers", "class_name": "Dense", "config": {"name": name, "units": units}}
big = [dense("d%d" % i, 16384) for i in range(39)] + [dense("out", 3)]
json.dump(seq(big, [4]), open("big.json", "w"))
json.dump(seq([dense("a", 4096), dense("b", 65536), dense("out", 3)], [4]), open("over.json", "w"))
emb = {"module": "keras.layers", "class_name": "Embedding",
       "config": {"name": "tokens", "input_dim": 256, "output_dim": 1040}}
pos = {"module": "keras_hub.layers", "class_name": "PositionEmbedding",
       "config": {"name": "positions", "sequence_length": 1048576}}
json.dump(seq([emb, pos], [8]), open("posemb.json", "w"))
os.mkdir("csv")
for name, n in (("train.csv", 30), ("test.csv", 6)):
    with open(os.path.join("csv", name), "w") as f:
        f.writelines("%d,%d,1,2,3\n" % (i % 3, i) for i in range(n))
EOF

# run NAME LIMIT CMD...: CMD's exit in $rc, its peak RSS in $rss (kB), stderr in NAME.err
run() {
    local name=$1 lim=$2
    shift 2
    timeout -s KILL "$lim" /usr/bin/time -f %M -o "$name.rss" "$@" >"$name.out" 2>"$name.err"
    rc=$?
    rss=$(tail -1 "$name.rss" 2>/dev/null)
    [[ $rss =~ ^[0-9]+$ ]] || rss=999999999
    echo "$name: exit $rc, peak RSS $rss kB: $(grep -m1 -i error "$name.err")"
}

# --- 7-9: outside the cgroup ------------------------------------------------------------------
MW_MEMORY_CHECK=off run over 60 "$mw" train --model over.json --data csv \
    --epochs 1 --steps-per-epoch 1 --progress none --summary-dir ''
check '[[ $rc -eq 2 ]]' "over 2^28 parameters: exit 2 (got $rc)"
check 'grep -qF "the model has 268718083 parameters, more than the 268435456 a checkpoint holds" \
    over.err' "over 2^28: the message names the count and the limit"
check 'grep -qF -- "--checkpoint-every-epochs 0" over.err' "over 2^28: says what to do"
check '((rss < RSS_MAX_KB))' "over 2^28: refused before allocating (peak RSS $rss kB)"

run posemb 60 "$mw" summary --model posemb.json
check '[[ $rc -eq 2 ]]' "PositionEmbedding(sequence_length=1048576): exit 2 (got $rc)"
check 'grep -qF "positions" posemb.err && grep -qF "a 1048576x1040 position table" posemb.err &&
    grep -qF "larger than the 268435456 values supported per tensor" posemb.err' \
    "PositionEmbedding: the message names the layer, the table and the cap"

if [[ $(cat /proc/sys/vm/overcommit_memory) == 1 ]]; then
    echo "part 9 skipped: vm.overcommit_memory is 1 (the kernel grants any allocation)"
else
    MW_MEMORY_CHECK=off run arena 60 "$mw" train --model big.json --data csv "${quick[@]}"
    check '[[ $rc -eq 6 ]]' "10 G parameters unchecked: the arena's failure is exit 6 (got $rc)"
    check 'grep -qF "model: cannot allocate its 10201300995 parameters" arena.err &&
        grep -qF "the largest tensor: layer '"'d1'"' (Dense)" arena.err' \
        "the arena's failure names the count and the layer"
fi

# --- 1-6: in a 512 MiB cgroup -----------------------------------------------------------------
if ! mw_cgroup_make 512M; then
    echo "SKIP parts 1-6: $mw_cg_skip"
    ((fail)) && exit 1
    exit 77
fi
echo "cgroup: $mw_cg (512 MiB, $mw_cg_kind)"
# in512 NAME CHECKS-LABEL CMD...: run in the cgroup; not killed, RSS under 64 MiB
in512() {
    local name=$1
    shift
    run "$name" 120 "${mw_cg_exec[@]}" "$@"
    check '[[ $rc -ne 137 ]]' "$name: not killed (137)"
    check '((rss < RSS_MAX_KB))' "$name: peak RSS $rss kB under $RSS_MAX_KB kB"
    check 'grep -q "$mw_cg_kind of /mwtrain-test-$$: limit 512.0 MiB" "$name.err" ||
        [[ $rc -eq 0 ]]' "$name: the message names the 512 MiB limit"
}

in512 nockpt "$mw" train --model over.json --data csv "${quick[@]}"
check '[[ $rc -eq 6 ]] && ! grep -q "a checkpoint holds" nockpt.err' \
    "over 2^28 without checkpoints: not refused for the format; exit 6 for the memory (got $rc)"

in512 train10g "$mw" train --model big.json --data csv "${quick[@]}"
check '[[ $rc -eq 6 ]]' "train10g: exit 6 (got $rc)"
check 'grep -q "this run needs about [0-9.]* GiB of memory on this rank" train10g.err &&
    grep -qF "use a smaller model (its parameters, gradients and optimizer state" train10g.err' \
    "train10g: the estimate, and the model named as what takes the most"

# with the default data set (Fashion-MNIST, 53 MiB): refused before it is loaded
in512 train10g-default "$mw" train --model big.json "${quick[@]}"
check '[[ $rc -eq 6 ]] && grep -qF "use a smaller model" train10g-default.err' \
    "train10g, the default data: exit 6 naming the model (got $rc)"

in512 summary10g "$mw" summary --model big.json
check '[[ $rc -eq 0 ]]' "summary10g: exit 0 (got $rc)"
check 'grep -q "^Total params: 10201300995$" summary10g.out' "summary10g: the parameter count"

truncate -s 2G corpus.txt
in512 corpus "$mw" train --data corpus.txt --sequence-length 64 "${quick[@]}"
rm -f corpus.txt
check '[[ $rc -eq 6 ]]' "2 GiB corpus: exit 6 (got $rc)"
check 'grep -qF "corpus.txt: a text corpus of 2147483648 bytes, read and cut into windows of token \
ids and labels (6 bytes a byte), takes 12.0 GiB" corpus.err' "2 GiB corpus: the message"

mkdir big-csv && cp csv/test.csv big-csv/
yes 1,0.5,2,3,4,5,6,7 | head -c 2G >big-csv/train.csv
in512 csv2g "$mw" train --data big-csv "${quick[@]}"
rm -rf big-csv
check '[[ $rc -eq 6 ]]' "2 GiB CSV: exit 6 (got $rc)"
check 'grep -qF "big-csv/train.csv: its 119304648 examples of 7 features take" csv2g.err' \
    "2 GiB CSV: the message names the file and the examples"

# ckpt/ckpt-1: adam, 2^28 - 2^20 parameters of zeros in params and two slots (each a zlib stream
# of 1 MB), and the index; small/ckpt-1: sgd, 16 parameters and no slot, the model big.json
/usr/bin/python3 - <<'EOF' || exit 1
import os, struct, zlib
model = open("big.json", "rb").read()
def stream(nbytes):
    c, crc, out, chunk = zlib.compressobj(9), 0, [], bytes(1 << 24)
    while nbytes > 0:
        k = min(nbytes, len(chunk))
        crc = zlib.crc32(chunk[:k], crc)
        out.append(c.compress(chunk[:k]))
        nbytes -= k
    out.append(c.flush())
    return b"".join(out), crc
def section(tag, raw_nbytes, payload, crc):
    return tag.ljust(8, b"\0") + struct.pack("<QQI", len(payload), raw_nbytes, crc) + payload
def checkpoint(d, optimizer, n, slots):
    meta = optimizer.ljust(16, b"\0") + struct.pack("<QQII", n, n if slots else 0, slots, 0)
    meta += struct.pack("<qqqqQqdQ", 1, 1, 0, 1, 42, 64, 0.001, len(model))
    zeros, zcrc = stream(4 * n)
    body = section(b"meta", len(meta), zlib.compress(meta), zlib.crc32(meta))
    body += section(b"model", len(model), zlib.compress(model), zlib.crc32(model))
    for tag in (b"params", b"slot1", b"slot2", b"slot3")[:1 + slots]:
        body += section(tag, 4 * n, zeros, zcrc)
    os.mkdir(d)
    with open(os.path.join(d, "ckpt-1"), "wb") as f:
        f.write(b"MWCKPT\0\1" + struct.pack("<II", 1, 3 + slots) + body)
    with open(os.path.join(d, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
checkpoint("ckpt", b"adam", (1 << 28) - (1 << 20), 2)
checkpoint("small", b"sgd", 16, 0)
EOF
in512 ckpt "$mw" eval --checkpoint-dir ckpt --data csv
check '[[ $rc -eq 6 ]]' "a checkpoint inflating to 3 GiB: exit 6 (got $rc)"
check 'grep -qF "ckpt-1: its sections inflate to 3.0 GiB" ckpt.err' \
    "the checkpoint: the message names it and the size"
MW_MEMORY_CHECK=off run ckpt-off 120 "${mw_cg_exec[@]}" "$mw" eval --checkpoint-dir ckpt --data csv
check '[[ $rc -eq 137 ]] || { [[ $rc -eq 6 ]] && ! grep -q "sections inflate to" ckpt-off.err; }' \
    "control: unchecked, the checkpoint is inflated into the limit (got $rc)"


# export builds the checkpoint's model: checked from its shapes as train's is (it had no check)
in512 export "$mw" export --checkpoint-dir small --output small.safetensors
check '[[ $rc -eq 6 ]]' "export of a 10 G-parameter model: exit 6 (got $rc)"
check 'grep -q "this run needs about [0-9.]* GiB of memory on this rank" export.err &&
    grep -qF "use a smaller model" export.err && [[ ! -e small.safetensors ]]' \
    "export: the estimate, the model named, nothing written"

finish
