#!/usr/bin/env python3
"""Speed of `onnx-doctor check` against onnx's checker + shape inference, whole process.

    python3 scripts/bench_check.py [--bin target/release/onnx-doctor] [--model PATH] [--runs 5]

Uses the ViT-B/16-sized model of scripts/bench_load.py (built on first use, 330 MiB, 1095 nodes).
Ours: `onnx-doctor check MODEL --format json` (spec checks + shape inference). Theirs, in a fresh
Python: `onnx.checker.check_model(path, full_check=True)` and
`onnx.shape_inference.infer_shapes(onnx.load(path), data_prop=True)`, import included, as ours
includes process start-up. Prints medians and the ratio.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load  # noqa: E402

ONNX_SIDE = """
import sys, onnx
from onnx import shape_inference
p = sys.argv[1]
onnx.checker.check_model(p, full_check=True)
shape_inference.infer_shapes(onnx.load(p), data_prop=True)
"""


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(root / "target/release/onnx-doctor"))
    ap.add_argument("--model", default=str(Path("/tmp/onnx-doctor-bench/vit_b16_like.onnx")))
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    model = Path(a.model)
    if not model.exists():
        model.parent.mkdir(parents=True, exist_ok=True)
        bench_load.build_vit(model)
    ours = bench_load.bench([str(Path(a.bin).resolve()), "check", str(model), "--format", "json"], a.runs)
    theirs = bench_load.bench([sys.executable, "-c", ONNX_SIDE, str(model)], a.runs)
    size = model.stat().st_size / 2**20
    print(f"model: {model} ({size:.1f} MiB); median of {a.runs} runs after one warm-up, whole process")
    print(f"onnx-doctor check            : {ours['wall'] * 1000:9.1f} ms")
    print(f"onnx checker + infer_shapes  : {theirs['wall'] * 1000:9.1f} ms")
    print(f"speed-up (onnx / ours)       : {theirs['wall'] / ours['wall']:9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
