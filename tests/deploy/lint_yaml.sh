#!/usr/bin/env bash
# yamllint, strict (warnings fail too), on every YAML file under deploy/ with the settings in
# yamllint.yaml beside this script, so a manifest that kubectl would reject for its syntax
# (tabs, bad indentation, duplicate keys) fails here first. Skips (exit 77) without yamllint;
# deploy/setup.sh installs it.
#   lint_yaml.sh [DEPLOY_DIR]      (default: $MW_SRCDIR/deploy)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:-${MW_SRCDIR:?pass DEPLOY_DIR or set MW_SRCDIR}/deploy}
if ! command -v yamllint >/dev/null; then
    echo "SKIP: yamllint is not installed (deploy/setup.sh installs it)"
    exit 77
fi
mapfile -t files < <(find "$dir" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort)
if ((${#files[@]} == 0)); then
    echo "FAIL: no YAML files under $dir"
    exit 1
fi
yamllint -s -c "$here/yamllint.yaml" "${files[@]}"
echo "${#files[@]} passed, 0 failed"
