#!/bin/sh
# Build the fuzz targets with clang and run a short, bounded libFuzzer session on each: the
# data readers (.npy, .npz, CIFAR), the TFRecord reader (framing, GZIP/ZLIB, the record
# index, tf.train.Example) and the image decoder (JPEG, PNG, GIF, BMP) for a twelfth of the
# time each, the TF_CONFIG parser, then the
# checkpoint reader, each for half of the rest, then the Keras model reader and the .keras
# archive reader for FUZZ_KERAS_SECONDS (default 10) between them.
#
#   tests/fuzz/run.sh [SECONDS]      (default 16 in all; FUZZ_RUNS caps the executions of each
#                                     target, default 2000000)
#
# FUZZ_STAGE=build only builds the targets into FUZZ_OUT (deploy/local/test.sh does it in the
# background while the suites run); FUZZ_STAGE=run then fuzzes with what is there, building
# only a target that is missing; the default builds and runs.
#
# Works without meson: one clang command line per target over the code under test and common/.
# New inputs go to scratch corpora, so the seed corpora in tests/fuzz/corpus/ stay as committed.
# Exits non-zero when a build fails or the fuzzer finds a crash, leak, timeout, out-of-memory or
# failed invariant; the reproducer is then left in the output directory (FUZZ_OUT, or a
# temporary one, removed after a clean run).
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_MAX=${1:-16}
RUNS=${FUZZ_RUNS:-2000000}
OUT=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mwfuzz-XXXXXX")}
CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
    for c in clang-14 clang; do
        if command -v "$c" >/dev/null 2>&1; then CLANG=$c; break; fi
    done
fi
[ -n "$CLANG" ] || { echo "run.sh: clang not found (set CLANG=...)" >&2; exit 2; }
STAGE=${FUZZ_STAGE:-all}
case $STAGE in build | run | all) ;; *) echo "run.sh: FUZZ_STAGE '$STAGE': expected build, run or all" >&2; exit 2 ;; esac
DATA_SECONDS=$(( SECONDS_MAX > 3 ? SECONDS_MAX / 4 : 1 ))
HALF=$(( SECONDS_MAX - DATA_SECONDS > 1 ? (SECONDS_MAX - DATA_SECONDS) / 2 : 1 ))
# The quarter is shared by the data readers, the TFRecord reader and the image decoder.
TFRECORD_SECONDS=$(( DATA_SECONDS > 2 ? DATA_SECONDS / 3 : 1 ))
IMAGE_SECONDS=$(( DATA_SECONDS > 2 ? DATA_SECONDS / 3 : 1 ))
OTHERS=$(( TFRECORD_SECONDS + IMAGE_SECONDS ))
DATA_SECONDS=$(( DATA_SECONDS > OTHERS ? DATA_SECONDS - OTHERS : 1 ))

# The targets compile concurrently (each clang command in the background; all are waited for
# before the first run): one after the other they took a minute of CI.
pids=""
# build_target TARGET ARGS...: build $OUT/TARGET in the background (not when FUZZ_STAGE=run finds it)
build_target() {
    target=$1
    shift
    if [ "$STAGE" = run ] && [ -x "$OUT/$target" ]; then return 0; fi
    "$CLANG" "$@" -o "$OUT/$target" &
    pids="$pids $!"
}
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# The optimizer table's header (worker/optimizers.h, read by the checkpoint and .keras archive
# code) sees mpi.h through worker/opts.h: those targets get its include path, no MPI code.
MPI_CFLAGS=$(pkg-config --cflags ompi-c 2>/dev/null || mpicc --showme:compile)
mkdir -p "$OUT/corpus-tfconfig" "$OUT/corpus-checkpoint"
# Every target links the whole of common/ (libc only, each file small): a module of common/ that
# starts using another needs no change here. The Keras model reader is its eight files (the
# graph, its named inputs and operations, KerasHub's task models built from their arguments).
COMMON="$ROOT/common/*.c -pthread"
KERAS_READER="$ROOT/worker/keras/keras.c $ROOT/worker/keras/keras_read.c
    $ROOT/worker/keras/keras_graph.c $ROOT/worker/keras/keras_vars.c
    $ROOT/worker/keras/keras_hub.c $ROOT/worker/keras/keras_hub_parts.c
    $ROOT/worker/keras/keras_inputs.c $ROOT/worker/keras/keras_ops.c"
# shellcheck disable=SC2086
build_target fuzz_tfconfig $CFLAGS -I"$ROOT" "$ROOT/tests/fuzz/fuzz_tfconfig.c" "$ROOT/cluster/tfconfig.c" \
    $COMMON -ljansson
# shellcheck disable=SC2086
build_target fuzz_checkpoint $CFLAGS $MPI_CFLAGS -I"$ROOT" "$ROOT/tests/fuzz/fuzz_checkpoint.c" "$ROOT/worker/checkpoint.c" \
    "$ROOT/worker/optimizers.c" "$ROOT/worker/opts.c" "$ROOT/worker/schedule.c" \
    "$ROOT/worker/model/loss.c" $COMMON -lz -lm
# The Keras model reader: worker/keras/keras.c and the model with its layers, the reference kernels, the embedded
# built-in model (generated as the build does), common/. Fuzzed for KERAS_SECONDS on its own.
KERAS_SECONDS=${FUZZ_KERAS_SECONDS:-10}
mkdir -p "$OUT/corpus-keras"
python3 "$ROOT/worker/models/embed.py" "$ROOT/worker/models/tutorial_cnn.json" \
    "$OUT/tutorial_cnn_json.c" mw_keras_tutorial_json
# shellcheck disable=SC2086
build_target fuzz_keras $CFLAGS -I"$ROOT" "$ROOT/tests/fuzz/fuzz_keras.c" $KERAS_READER \
    "$ROOT"/worker/model/*.c "$ROOT"/worker/model/layers/*.c \
    "$ROOT/worker/data/preprocess.c" "$OUT/tutorial_cnn_json.c" "$ROOT/kernels/geom.c" \
    "$ROOT"/kernels/ref/*.c $COMMON -ljansson -lm

# The Example parser protoc-c generates from worker/data/example.proto (as the build does), for
# the data readers (TFRecord shards are one) and the TFRecord reader.
protoc-c --proto_path="$ROOT/worker/data" --c_out="$OUT" "$ROOT/worker/data/example.proto"
# The data readers: worker/data/data*.c with what the image-folder and shard readers stand on
# (the stream of encoded examples, the image decoder, the TFRecord reader), common/, libzip,
# zlib, the image libraries and libprotobuf-c.
mkdir -p "$OUT/corpus-data"
DATA_DEPS="$ROOT/worker/data/stream.c $ROOT/worker/data/prefetch.c $ROOT/worker/data/skip.c
    $ROOT/worker/data/np_shuffle.c $ROOT/worker/data/shard_copy.c $ROOT/worker/data/shard_index.c
    $ROOT/worker/data/image_decode.c
    $ROOT/worker/data/image_resize.c $ROOT/worker/data/example.c $OUT/example.pb-c.c"
# shellcheck disable=SC2086,SC2046
build_target fuzz_data $CFLAGS -I"$ROOT" -I"$OUT" $(pkg-config --cflags libjpeg libpng libgif) \
    "$ROOT/tests/fuzz/fuzz_data.c" "$ROOT"/worker/data/data*.c "$ROOT/worker/data/preprocess.c" \
    "$ROOT/worker/data/zip_input.c" "$ROOT/worker/model/keras_keys.c" \
    "$ROOT"/worker/data/tfrecord*.c $DATA_DEPS $COMMON -ljansson -lzip -lz -lm \
    $(pkg-config --libs libjpeg libpng libgif) -lprotobuf-c

# The TFRecord reader: worker/data/tfrecord*.c and example.c with the parser protoc-c
# generates from worker/data/example.proto (as the build does), common/, zlib, libprotobuf-c.
mkdir -p "$OUT/corpus-tfrecord"
# shellcheck disable=SC2086
build_target fuzz_tfrecord $CFLAGS -I"$ROOT" -I"$OUT" "$ROOT/tests/fuzz/fuzz_tfrecord.c" \
    "$ROOT"/worker/data/tfrecord*.c "$ROOT/worker/data/example.c" "$OUT/example.pb-c.c" \
    $COMMON -lprotobuf-c -lz
# Gzip and zlib headers, the protobuf tags of an Example's nesting, the features' names.
cat > "$OUT/tfrecord.dict" <<'DICT'
"\x1f\x8b\x08\x00"
"\x78\x9c"
"\x78\x01"
"\x0a"
"\x12"
"\x1a"
"image"
"label"
"image/encoded"
"image/class/label"
"-train.tfrecord-"
"-of-"
"00016"
"\xff\xff\xff\xff\xff\xff\xff\xff\x01"
DICT

# The image decoder (worker/data/image_decode.c) over the installed libjpeg-turbo, libpng and
# giflib, which are not instrumented.
mkdir -p "$OUT/corpus-image"
# shellcheck disable=SC2086,SC2046
build_target fuzz_image $CFLAGS -I"$ROOT" $(pkg-config --cflags libjpeg libpng libgif) \
    "$ROOT/tests/fuzz/fuzz_image.c" "$ROOT/worker/data/image_decode.c" \
    "$ROOT/worker/data/image_resize.c" $COMMON \
    $(pkg-config --libs libjpeg libpng libgif) -lm
# Signatures and chunk, marker and block names of the four formats.
cat > "$OUT/image.dict" <<'DICT'
"\xff\xd8\xff"
"\xff\xc0"
"\xff\xc2"
"\xff\xc4"
"\xff\xda"
"\xff\xd9"
"Adobe"
"\x89PNG\x0d\x0a\x1a\x0a"
"IHDR"
"PLTE"
"tRNS"
"IDAT"
"IEND"
"GIF89a"
"GIF87a"
"\x21\xf9\x04"
"BM"
"\x28\x00\x00\x00"
DICT

# Tokens that reach the validator's branches quickly.
cat > "$OUT/tfconfig.dict" <<'DICT'
"\"cluster\""
"\"task\""
"\"type\""
"\"index\""
"\"chief\""
"\"worker\""
"\"evaluator\""
"\"ps\""
"\"environment\""
"\"rpc_layer\""
"\"master\""
":2222"
":65535"
":65536"
":0"
"[::1]"
"localhost"
"\\u0000"
"null"
"true"
"1e999"
DICT

# The checkpoint format's magic, section tags and optimizer names (docs/checkpoint.md).
cat > "$OUT/checkpoint.dict" <<'DICT'
"MWCKPT\x00\x01"
"meta\x00\x00\x00\x00"
"model\x00\x00\x00"
"params\x00\x00"
"slot1\x00\x00\x00"
"slot2\x00\x00\x00"
"adam"
"sgd"
"\x01\x00\x00\x00"
"\x00\x00\x00\x40\x00\x00\x00\x00"
"\xff\xff\xff\xff\xff\xff\xff\xff"
DICT

# The .keras archive reader (worker/keras/keras_archive.c, keras_h5.c, keras_vars.c) over the installed
# libzip and libhdf5, with the model reader under it. It takes a third of KERAS_SECONDS from the
# model reader, so the run's total time stays the same.
ARCHIVE_SECONDS=$(( KERAS_SECONDS >= 3 ? KERAS_SECONDS / 3 : 1 ))
KERAS_SECONDS=$(( KERAS_SECONDS > ARCHIVE_SECONDS ? KERAS_SECONDS - ARCHIVE_SECONDS : 1 ))
mkdir -p "$OUT/corpus-keras_archive"
# shellcheck disable=SC2086,SC2046
build_target fuzz_keras_archive $CFLAGS $MPI_CFLAGS -I"$ROOT" $(pkg-config --cflags hdf5 libzip) \
    "$ROOT/tests/fuzz/fuzz_keras_archive.c" "$ROOT/worker/keras/keras_archive.c" \
    "$ROOT/worker/optimizers.c" "$ROOT/worker/opts.c" "$ROOT/worker/schedule.c" \
    "$ROOT/worker/keras/keras_h5.c" $KERAS_READER \
    "$ROOT/worker/keras/keras_loss.c" "$ROOT/worker/keras/kconfig.c" \
    "$ROOT/worker/data/zip_input.c" "$ROOT"/worker/model/*.c "$ROOT"/worker/model/layers/*.c \
    "$ROOT/worker/data/preprocess.c" "$OUT/tutorial_cnn_json.c" "$ROOT/kernels/geom.c" \
    "$ROOT"/kernels/ref/*.c $COMMON $(pkg-config --libs hdf5 libzip) -ljansson -lm
cat > "$OUT/keras_archive.dict" <<'DICT'
"PK\x03\x04"
"PK\x01\x02"
"PK\x05\x06"
"config.json"
"metadata.json"
"model.weights.h5"
"\x89HDF\x0d\x0a\x1a\x0a"
DICT

# Keras config keys and values (worker/keras/keras.h).
cat > "$OUT/keras.dict" <<'DICT'
"\"class_name\""
"\"config\""
"\"layers\""
"\"Sequential\""
"\"modelTopology\""
"\"model_config\""
"\"batch_input_shape\""
"\"batch_shape\""
"\"InputLayer\""
"\"Conv2D\""
"\"MaxPooling2D\""
"\"Flatten\""
"\"Dense\""
"\"Dropout\""
"\"Activation\""
"\"ReLU\""
"\"Softmax\""
"\"filters\""
"\"kernel_size\""
"\"strides\""
"\"padding\""
"\"same\""
"\"units\""
"\"rate\""
"\"activation\""
"\"relu\""
"\"softmax\""
"\"kernel_initializer\""
"\"VarianceScaling\""
"\"mode\""
"\"distribution\""
"\"kernel_regularizer\""
"\"L1L2\""
"\"use_bias\""
"\"pool_size\""
"[null, 28, 28, 1]"
"[null, 784]"
DICT

# .npy header keys and values, zip signatures and CIFAR-sized counts.
cat > "$OUT/data.dict" <<'DICT'
"\x93NUMPY\x01\x00"
"\x93NUMPY\x02\x00"
"'descr'"
"'fortran_order'"
"'shape'"
"'|u1'"
"'<f4'"
"'<i4'"
"'<i8'"
"False"
"True"
"(2, 3, 2, 1)"
"PK\x03\x04"
"PK\x01\x02"
"PK\x05\x06"
"x_train.npy"
"y_train.npy"
"x_test.npy"
"y_test.npy"
DICT

build_failed=0
for pid in $pids; do
    wait "$pid" || build_failed=1
done
[ "$build_failed" -eq 0 ] || { echo "run.sh: a fuzz target did not build" >&2; exit 1; }
if [ "$STAGE" = build ]; then
    echo "run.sh: fuzz targets built in $OUT"
    exit 0
fi

# run NAME MAX_LEN MALLOC_LIMIT_MB [SECONDS]: fuzz one target for SECONDS (default HALF);
# remember a failure.
failed=0
run() {
    echo "run.sh: fuzzing $1 for at most ${4:-$HALF}s / ${RUNS} runs in $OUT"
    set +e
    "$OUT/fuzz_$1" -max_total_time="${4:-$HALF}" -runs="$RUNS" -max_len="$2" -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb="$3" -dict="$OUT/$1.dict" \
        -artifact_prefix="$OUT/$1-" -print_final_stats=1 \
        "$OUT/corpus-$1" "$ROOT/tests/fuzz/corpus/$1"
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        echo "run.sh: fuzzing $1 failed (exit $rc)" >&2
        failed=1
    fi
}
# An archive may only allocate what its members can inflate to (about 1032:1).
run data 8192 256 "$DATA_SECONDS"
# A record may be up to MW_TFRECORD_MAX_RECORD (256 MiB) once it is there; a fuzz input is far
# smaller, so 256 MiB is a limit no valid input reaches.
run tfrecord 65536 256 "$TFRECORD_SECONDS"
# An image may allocate its pixels up to MW_IMAGE_MAX_PIXELS x 4 channels (512 MiB).
run image 8192 640 "$IMAGE_SECONDS"
run tfconfig 4096 2048
# A checkpoint may only allocate what its bytes can inflate to (1032:1): 64 MiB is plenty here.
run checkpoint 8192 64
run keras 8192 512 "$KERAS_SECONDS"
run keras_archive 65536 512 "$ARCHIVE_SECONDS"

if [ "$failed" -ne 0 ]; then
    echo "run.sh: reproducers in $OUT:" >&2
    ls "$OUT" | grep -E -- '-(crash|leak|timeout|oom)-' >&2 || true
    exit 1
fi
echo "run.sh: no crash"
[ -n "${FUZZ_OUT:-}" ] || rm -rf "$OUT"
