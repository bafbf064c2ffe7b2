#!/usr/bin/env bash
# Compare `onnx-doctor shapes` with onnx.shape_inference(data_prop=True) on the node-test corpus.
#   scripts/shapes_vs_onnx.sh [BINARY] [GLOB]     (defaults: target/debug/onnx-doctor, corpus/node/*/model.onnx)
# Prints {"values": N, "matched": M, "missing": {op: n}, "wrong": {op: n}, "examples": [...]}.
set -euo pipefail
bin=${1:-target/debug/onnx-doctor}
glob=${2:-corpus/node/*/model.onnx}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
for f in $glob; do
    i=$((i + 1))
    "$bin" shapes "$f" -o "$out/$i.onnx" 2>/dev/null || true
    printf '%s\t%s\n' "$f" "$out/$i.onnx"
done > "$out/pairs"
python3 "$(dirname "$0")/../crates/cli/tests/shapes_compare.py" < "$out/pairs"
