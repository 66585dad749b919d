#!/usr/bin/env bash
# Every C, CUDA and header file git tracks is formatted as .clang-format says (docs/contributing.md:
# 4-space indent, 100 columns, ...). Lists the files that are not, with the command that fixes
# them. Skipped (77, with the reason) where clang-format is not installed; deploy/setup.sh
# installs it, so CI always runs it.
#   check_format.sh SOURCE_ROOT
set -uo pipefail
cd "$1" || exit 1
cf=$(command -v clang-format || command -v clang-format-14 || true)
if [[ -z $cf ]]; then
    echo "SKIP: clang-format is not installed (deploy/setup.sh installs it)"
    exit 77
fi
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null)
if ((${#files[@]} == 0)); then
    echo "FAIL: no tracked C files under $1 (not a git checkout?)"
    exit 1
fi
bad=()
for f in "${files[@]}"; do
    "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
    echo "FAIL: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($($cf --version)):"
    printf '  %s\n' "${bad[@]}"
    echo "fix: $cf -i ${bad[*]}"
    exit 1
fi
echo "format: ${#files[@]} files match .clang-format ($($cf --version))"
