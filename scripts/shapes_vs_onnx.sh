#!/usr/bin/env bash
# Compare `onnx-doctor shapes` with onnx.shape_inference(data_prop=True).
#   scripts/shapes_vs_onnx.sh [BINARY] [MODEL...]
# Default models: the node-test corpus (corpus/node/*/model.onnx) and the model tests shipped in the
# onnx package (light, pytorch-converted, pytorch-operator, simple).
# Prints {"values": N, "matched": M, "missing": {op: n}, "wrong": {op: n}, "examples": [...]}.
set -euo pipefail
bin=${1:-target/debug/onnx-doctor}
shift || true
if [ $# -eq 0 ]; then
    data=$(python3 -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data
    set -- corpus/node/*/model.onnx
    for kind in light pytorch-converted pytorch-operator simple; do
        for f in "$data/$kind"/*.onnx "$data/$kind"/*/model.onnx; do
            [ -f "$f" ] && set -- "$@" "$f"
        done
    done
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
for f in "$@"; do
    i=$((i + 1))
    "$bin" shapes "$f" -o "$out/$i.onnx" 2>/dev/null || true
    printf '%s\t%s\n' "$f" "$out/$i.onnx"
done > "$out/pairs"
python3 "$(dirname "$0")/../crates/cli/tests/shapes_compare.py" < "$out/pairs"
