#!/usr/bin/env bash
# Runs every test: installs the Python oracles if missing, generates the ONNX node-test corpus
# (git-ignored, under corpus/) if missing, then the whole cargo test suite, which includes the
# conformance tests against the onnx package.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# ml_dtypes is pinned: the node corpus's Cast-to-INT4/INT2 cases hold out-of-range float
# values, which the ONNX spec leaves undefined, and ml_dtypes 0.7 computes them differently
# (0) from 0.5 (wrap-around), so the generated expected outputs depend on its version.
if ! python3 -c 'import onnx, onnxruntime, numpy, ml_dtypes; assert onnx.__version__ == "1.23.2" and ml_dtypes.__version__ == "0.5.4"' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check onnx==1.23.2 ml_dtypes==0.5.4 onnxruntime numpy
fi
if [ ! -f corpus/node/test_abs/model.onnx ]; then
    python3 scripts/gen_node_corpus.py corpus
fi
cargo run -q --locked -p xtask -- gen-proto --check
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked "$@" 2>&1 | tee "$log"
# One closing line over every test binary (cargo prints one per binary, the last often a doc-test
# run with nothing in it).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
