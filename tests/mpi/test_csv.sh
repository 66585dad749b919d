#!/usr/bin/env bash
# The CSV reader (worker/data/data_csv.c), against NumPy as the oracle:
#   1. a tabular set written by numpy.savetxt (a header line, CRLF line ends in test.csv, a
#      blank line; files over the reader's 1 MiB buffer, read twice) trains to --dump-weights identical to the same arrays in a .npz (features
#      (N, F) float32, as a tabular x_train is), with a Dense model on Input((12,)), on 1 rank
#      and on 2 ranks;
#   2. bad CSV files end with exit 3 and one message naming the file, the line and the field (a
#      line over the reader's 1 MiB buffer too); a missing test.csv with exit 4 naming it;
#   3. the line rules (docs/data.md): a byte order mark, CR alone as the line end, a denormal or
#      a quoted header name keep every example (counted in --verbose's data line).
#   test_csv.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skip: $py has no numpy (Debian package python3-numpy, deploy/setup.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
t = sys.argv[1]
r = np.random.default_rng(29)
n, F = 30000, 12  # train.csv 2.5 MB, test.csv 1.3 MB: lines cross the reader's 1 MiB buffer
x = r.normal(size=(n, F)).astype(np.float32)
y = np.argmax(x @ r.normal(size=(F, 4)), axis=1)
tr, te = slice(0, 20000), slice(20000, n)
np.savez(f"{t}/tab.npz", x_train=x[tr], y_train=y[tr], x_test=x[te], y_test=y[te])
import os
os.makedirs(f"{t}/csv")
rows = lambda s: np.column_stack([y[s].astype(np.float64), x[s].astype(np.float64)])
# %.9g: 9 significant digits give every float32 back exactly
np.savetxt(f"{t}/csv/train.csv", rows(tr), fmt=["%d"] + ["%.9g"] * F, delimiter=",",
           header="label," + ",".join(f"f{i}" for i in range(F)), comments="")
np.savetxt(f"{t}/csv/test.csv", rows(te), fmt=["%d"] + ["%.9g"] * F, delimiter=",",
           newline="\r\n")
with open(f"{t}/csv/train.csv", "a") as f:
    f.write("\n")
PY
cat >"$tmp/mlp.json" <<'JSON'
{"class_name": "Sequential", "config": {"name": "tab", "layers": [
 {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 12], "name": "in"}},
 {"class_name": "Dense", "config": {"name": "d1", "units": 16, "activation": "relu"}},
 {"class_name": "Dense", "config": {"name": "d2", "units": 4}}]}}
JSON
common=(train --model "$tmp/mlp.json" --epochs 2 --batch-per-replica 20 --progress none --quiet
        --summary-dir "" --checkpoint-every-epochs 0 --collective-timeout 120)
for n in 1 2; do
    for d in csv tab.npz; do
        timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" --data "$tmp/$d" \
            --dump-weights "$tmp/$d-$n.bin" >"$tmp/$d-$n.out" 2>&1 ||
            echo "$d on $n rank(s): $(tail -n 3 "$tmp/$d-$n.out")"
    done
    check 'cmp -s "$tmp/csv-$n.bin" "$tmp/tab.npz-$n.bin"' \
        "$n rank(s): the CSV files train bitwise like the .npz of the same arrays"
done

bad() { # name train.csv-text expected-message-part
    local name=$1 want=$3
    mkdir -p "$tmp/bad-$1"
    printf '%b' "$2" >"$tmp/bad-$1/train.csv"
    printf '0,1,2\n' >"$tmp/bad-$1/test.csv"
    timeout 120 "$mw" train --data "$tmp/bad-$1" --epochs 1 --progress none --summary-dir "" \
        --checkpoint-every-epochs 0 >"$tmp/bad-$1.out" 2>&1
    local rc=$?
    check '[[ $rc -eq 3 ]] && grep -qF -- "$want" "$tmp/bad-$name.out"' \
        "$name: exit 3 and '$want' (got $rc: $(tail -n 1 "$tmp/bad-$name.out"))"
}
bad word '0,1,2\n1,x3,4\n' "bad-word/train.csv: line 2: field 2: found 'x3'; expected a number"
bad ragged 'label,a,b\n0,1,2\n1,2\n' "bad-ragged/train.csv: line 3: 2 fields, but the first example has 3"
bad label '0,1,2\n-1,2,3\n' "bad-label/train.csv: line 2: label -1; expected an integer from 0 to 65535"
bad label-real '0,1,2\n1.5,2,3\n' "line 2: label 1.5; expected an integer"
bad huge '0,1,2\n1,1e39,3\n' "line 2: field 2: 1e+39 is not a finite float32"
bad nan '0,1,2\n1,nan,3\n' "line 2: field 2: nan is not a finite float32"
bad empty '' "bad-empty/train.csv: no examples"
bad header-only 'label,a,b\n' "bad-header-only/train.csv: no examples"
bad one-field '0\n1\n' "line 1: 1 field; expected a label and at least one feature"
bad long-line "0,1\n1,$(printf '%1100000s' | tr ' ' 1)\n" \
    "bad-long-line/train.csv: line 2: longer than 1048576 bytes; expected a label and at most"
# an empty field, last or not, is an error: strtod would have read the next line's label
bad trailing-comma '0,1,2,3,\n1,2,3,4,\n' "bad-trailing-comma/train.csv: line 1: field 5 (column 5) is empty; expected a number"
bad trailing-blank '0,1,2,3, \n1,2,3,4\n' "line 1: field 5 (column 5) is empty"
bad empty-field '0,1,2\n1,,3\n' "bad-empty-field/train.csv: line 2: field 2 (column 2) is empty"
# a first line of numbers is data, however it ends: never taken for a header
bad wide "$(seq -s, 0 4999)\n" "bad-wide/train.csv: line 1: 5000 fields; expected a label and at most 4096 features"
bad first-overflow '0,1e999,2\n1,2,3\n' "bad-first-overflow/train.csv: line 1: field 2: inf is not a finite float32"
# errors after a header name the file's own line
bad after-header 'label,a,b\n0,1,2\n1,x,3\n' "bad-after-header/train.csv: line 3: field 2: found 'x'"
bad label-after-header 'label,a,b\n0,1,2\n-1,2,3\n' "bad-label-after-header/train.csv: line 3: label -1"
bad inf-after-header 'label,a,b\n\n0,1,2\n1,2,1e39\n' "bad-inf-after-header/train.csv: line 4: field 3: 1e+39 is not a finite float32"
bad header-width 'label,a\n0,1,2\n' "bad-header-width/train.csv: line 1: field 1: found 'label'; expected a number (not a header either: it has 2 fields, the first example 3"
bad cr-only '0,1,2\r1,x,3\r' "bad-cr-only/train.csv: line 2: field 2: found 'x'"

good() { # name train.csv-text examples
    mkdir -p "$tmp/good-$1"
    printf '%b' "$2" >"$tmp/good-$1/train.csv"
    printf '0,1,2,3\n' >"$tmp/good-$1/test.csv"
    timeout 120 "$mw" train --data "$tmp/good-$1" --model "$tmp/mlp3.json" --epochs 1 \
        --batch-per-replica 1 --classes 4 --progress none --summary-dir "" --checkpoint-every-epochs 0 \
        --verbose >"$tmp/good-$1.out" 2>&1
    local rc=$? name=$1 want="data: $3 train and 1 test examples of 3 features"
    check '[[ $rc -eq 0 ]] && grep -qF "$want" "$tmp/good-$name.out"' \
        "$name: exit 0 and '$want' (got $rc: $(grep -m1 'data:\|error' "$tmp/good-$name.out"))"
}
sed 's/12\]/3]/' "$tmp/mlp.json" >"$tmp/mlp3.json"
good bom '\xef\xbb\xbf0,1,2,3\n1,2,3,4\n' 2
good bom-header '\xef\xbb\xbflabel,a,b,c\n0,1,2,3\n1,2,3,4\n' 2
good cr-only '0,1,2,3\r1,2,3,4\r\r' 2
good crlf-mixed '0,1,2,3\r\n1,2,3,4\n2,1,1,1\r' 3
good denormal '0,1e-320,2,3\n1,2,3,4\n' 2
good quoted-header '"label","a,b",c,d\n0,1,2,3\n' 1
good padded '0 , 1,\t2 ,3\n' 1

# test.csv missing: the reader's open names it (exit 4, a file that cannot be read)
mkdir -p "$tmp/no-test" && printf '0,1,2\n' >"$tmp/no-test/train.csv"
timeout 120 "$mw" train --data "$tmp/no-test" --epochs 1 --progress none --summary-dir "" \
    --checkpoint-every-epochs 0 >"$tmp/no-test.out" 2>&1
rc=$?
check '[[ $rc -eq 4 ]] && grep -qF "no-test/test.csv" "$tmp/no-test.out"' \
    "test.csv missing: exit 4 naming it (got $rc: $(tail -n 1 "$tmp/no-test.out"))"
finish
