#!/usr/bin/env python3
"""Runs models on onnxruntime and on `onnx-doctor run` with the same seeded inputs and compares.

    python3 scripts/compare_ort.py --bin target/debug/onnx-doctor MODEL.onnx [MODEL.onnx ...]
        [--rtol 1e-3] [--atol 1e-4] [--dim NAME=N ...] [--seed 0]

For each model: inputs for every graph input without an initializer (floats standard normal,
integers in [0, 10), booleans fair; symbolic dims from --dim, else 1) are written as .npy,
onnxruntime's outputs are the reference, `onnx-doctor run --input NAME=FILE.npy ... --output
ours.npz` produces ours. Prints one line per model with the worst error; exits 1 if any model
fails to run or differs beyond the tolerances.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

NP = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.BOOL: np.bool_,
}


def make_inputs(model, dims, seed):
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                shape.append(dims.get(d.dim_param, 1))
        dtype = NP[tt.elem_type]
        if np.issubdtype(dtype, np.floating):
            v = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            v = rng.random(shape) > 0.5
        else:
            v = rng.integers(0, 10, size=shape).astype(dtype)
        feeds[i.name] = v
    return feeds


def compare(name, got, want, rtol, atol):
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} but onnxruntime gives {want.shape}", None
    if got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype} but onnxruntime gives {want.dtype}", None
    if not np.issubdtype(want.dtype, np.floating):
        bad = int(np.sum(got != want))
        return (f"{name}: {bad} elements differ" if bad else None), 0.0
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    err = np.abs(g - w)
    worst = float(np.nanmax(err)) if err.size else 0.0
    ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    bad = int(err.size - np.sum(ok))
    if bad:
        return f"{name}: {bad}/{err.size} elements beyond rtol {rtol} atol {atol} (max abs err {worst:.3e})", worst
    return None, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dims = {k: int(v) for k, v in (d.split("=") for d in args.dim)}
    failed = 0
    for path in args.models:
        model = onnx.load(path)
        feeds = make_inputs(model, dims, args.seed)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        want = dict(zip(names, sess.run(names, feeds)))
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [args.bin, "run", path, "--output", os.path.join(tmp, "ours.npz")]
            for k, v in feeds.items():
                f = os.path.join(tmp, f"in{len(cmd)}.npy")
                np.save(f, v)
                cmd += ["--input", f"{k}={f}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {path}: onnx-doctor exit {r.returncode}: {r.stderr.strip()}")
                failed += 1
                continue
            ours = np.load(os.path.join(tmp, "ours.npz"))
            problems, worst = [], 0.0
            for n in names:
                if n not in ours:
                    problems.append(f"{n}: missing from onnx-doctor's outputs")
                    continue
                p, w = compare(n, ours[n], want[n], args.rtol, args.atol)
                worst = max(worst, w or 0.0)
                if p:
                    problems.append(p)
            if problems:
                failed += 1
                print(f"FAIL {path}: " + "; ".join(problems))
            else:
                print(f"ok   {path}: {len(names)} outputs, max abs err {worst:.3e}")
    print(f"{len(args.models) - failed} of {len(args.models)} models match onnxruntime")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
