#!/usr/bin/env python3
"""Engine benchmark: `onnx-doctor bench --backend native` against onnxruntime on real networks.

1. Exports, once, into a cache directory outside git (default /tmp/onnx-doctor-bench/models,
   reused on later runs; torch is imported only when something is missing):
   resnet18, mobilenet_v3_small, efficientnet_b0, convnext_tiny, vit_b_16 (torchvision, random
   weights, batch 1, 3x224x224), `hybrid` (a CNN stem to 14x14x256 tokens and 4 transformer
   encoder layers, d=256, 8 heads, GELU), `bert` (nn.TransformerEncoder: 12 layers, d=768, 12 heads,
   feed-forward 3072, sequence 128, batch 1) and `gru` (nn.GRU: 2 layers, input 128, hidden 256,
   sequence 64, batch 1); opset 17, TorchScript exporter (`torch.onnx.export(..., dynamo=False)`),
   each as <cache>/<model>/model.onnx with its seeded input as input_<NAME>.npy.
2. For each model and each thread count (default 1 and 2), in this one run:
   - ours: `<bin> bench model.onnx --input NAME=input_NAME.npy --runs N --warmup W --threads T
     --backend native --format json` (a child process; its median_ms);
   - onnxruntime: the Python wheel in this process, on the same arrays, with
     intra_op_num_threads=T, inter_op_num_threads=1, sequential execution, CPU provider, default
     (all) graph optimisations; W untimed runs, then N runs each timed alone; the median.
3. Prints a table: model / threads / ours median ms / ORT median ms / ratio (ours / ORT). A model
   our engine cannot run is a row with the error, never a missing row. --json FILE keeps every
   figure (both sides' full statistics).

Usage:
    cargo build --release -p cli
    python3 scripts/bench_engine.py [--bin target/release/onnx-doctor] [--runs 10] [--warmup 2]
        [--threads 1,2] [--models resnet18,gru] [--cache DIR] [--timeout 1800] [--json FILE]
        [--peers ort,tract]   # also `bench --backend X` (a binary built with --features X)
        [--tract-wheel]       # also tract's Python wheel (pip install tract), 1 thread
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OPSET = 17
TORCHVISION = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "vit_b_16"]
MODELS = TORCHVISION + ["hybrid", "bert", "gru"]
DEFAULT_CACHE = Path("/tmp/onnx-doctor-bench/models")


def build(name: str):
    """The module and its example input (seeded) for `name`."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    # The fused attention / encoder-layer fast paths of eval mode have no ONNX export.
    torch.backends.mha.set_fastpath_enabled(False)
    if name in TORCHVISION:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, 224, 224)
    elif name == "bert":
        layer = nn.TransformerEncoderLayer(
            d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0, batch_first=True
        )
        model = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
        # The 12 layers start as copies of one; give each its own weights, or the exporter
        # stores one set of (identical) initializers for all of them.
        for lay in model.layers:
            lay.self_attn._reset_parameters()
            for m in lay.modules():
                if isinstance(m, nn.Linear):
                    m.reset_parameters()
        x = torch.randn(1, 128, 768)
    elif name == "hybrid":

        class Hybrid(nn.Module):
            """A CNN stem (224 -> 14x14, 256 channels) feeding 4 transformer encoder layers."""

            def __init__(self):
                super().__init__()

                def block(cin, cout, k, s):
                    return [nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

                self.stem = nn.Sequential(
                    *block(3, 64, 7, 2),
                    nn.MaxPool2d(3, 2, 1),
                    *block(64, 128, 3, 2),
                    *block(128, 256, 3, 2),
                )
                layer = nn.TransformerEncoderLayer(
                    d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True,
                    activation="gelu",
                )
                self.encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
                for lay in self.encoder.layers:
                    lay.self_attn._reset_parameters()
                    for m in lay.modules():
                        if isinstance(m, nn.Linear):
                            m.reset_parameters()
                self.head = nn.Linear(256, 1000)

            def forward(self, x):
                t = self.stem(x).flatten(2).transpose(1, 2)
                return self.head(self.encoder(t).mean(1))

        model = Hybrid()
        x = torch.randn(1, 3, 224, 224)
    elif name == "gru":

        class Gru(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(input_size=128, hidden_size=256, num_layers=2, batch_first=True)

            def forward(self, x):
                return self.gru(x)[0]

        model = Gru()
        x = torch.randn(1, 64, 128)
    else:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    return model.eval(), x


def export(name: str, cache: Path) -> Path:
    """<cache>/<name>/model.onnx (+ input_input.npy), exported unless already there."""
    out = cache / name
    if (out / "model.onnx").is_file():
        return out
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the legacy exporter, on purpose
    warnings.filterwarnings("ignore", category=UserWarning)
    model, x = build(name)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
    try:
        with torch.no_grad():
            torch.onnx.export(
                model,
                (x,),
                str(tmp / "model.onnx"),
                dynamo=False,
                opset_version=OPSET,
                input_names=["input"],
                output_names=["output"],
            )
        np.save(tmp / "input_input.npy", x.numpy())
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)  # whole directory at once: a half-written export is never reused
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def inputs_of(model_dir: Path) -> dict[str, np.ndarray]:
    return {
        p.name[len("input_") : -len(".npy")]: np.load(p)
        for p in sorted(model_dir.glob("input_*.npy"))
    }


def error_line(stderr: str) -> str:
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("error:")]
    return (errs[-1] if errs else lines[-1] if lines else "no output")[:400]


def ours(
    bin_: str,
    model_dir: Path,
    threads: int,
    runs: int,
    warmup: int,
    timeout: float,
    backend: str = "native",
) -> dict:
    cmd = [bin_, "bench", str(model_dir / "model.onnx")]
    for name in inputs_of(model_dir):
        cmd += ["--input", f"{name}={model_dir / f'input_{name}.npy'}"]
    cmd += ["--runs", str(runs), "--warmup", str(warmup), "--threads", str(threads)]
    cmd += ["--backend", backend, "--format", "json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": error_line(p.stderr)}
    return json.loads(p.stdout)


def onnxruntime_side(model_dir: Path, threads: int, runs: int, warmup: int) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    feed = inputs_of(model_dir)
    t0 = time.perf_counter()
    try:
        sess = ort.InferenceSession(
            str(model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e).strip()[:300]}"}
    load_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup):
        sess.run(None, feed)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feed)
        samples.append((time.perf_counter() - t) * 1e3)
    del sess
    s = sorted(samples)
    return {
        "load_ms": load_ms,
        "min_ms": s[0],
        "median_ms": statistics.median(s),
        "mean_ms": statistics.fmean(s),
        "p90_ms": float(np.percentile(s, 90)),
        "max_ms": s[-1],
        "runs": runs,
        "warmup": warmup,
        "threads": threads,
        "version": ort.__version__,
    }


def tract_side(model_dir: Path, runs: int, warmup: int) -> dict:
    """tract's Python wheel (`pip install tract`, single-threaded), on the same arrays."""
    try:
        import tract
    except ImportError:
        return {"error": "the tract wheel is not installed (pip install tract)"}
    feed = list(inputs_of(model_dir).values())
    try:
        t0 = time.perf_counter()
        # tract 0.23's wheel: load → typed model → runnable (optimised on the way).
        model = tract.onnx().load(str(model_dir / "model.onnx")).into_model().into_runnable()
        load_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(warmup):
            model.run(feed)
        samples = []
        for _ in range(runs):
            t = time.perf_counter()
            model.run(feed)
            samples.append((time.perf_counter() - t) * 1e3)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e).strip()[:300]}"}
    return {"load_ms": load_ms, "median_ms": statistics.median(samples), "min_ms": min(samples),
            "runs": runs, "threads": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/onnx-doctor")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per `bench` of ours")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument(
        "--peers",
        default="",
        help="also time `bench --backend X` for these (ort,tract; needs a binary built with "
        "--features X): one more column each, a check of the harness against the wheel",
    )
    ap.add_argument(
        "--tract-wheel",
        action="store_true",
        help="also time tract's Python wheel (pip install tract) at 1 thread: ours / tract",
    )
    args = ap.parse_args()

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)} (known: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.bin) and os.access(args.bin, os.X_OK)):
        print(f"{args.bin}: no such executable (cargo build --release -p cli)", file=sys.stderr)
        return 2
    thread_counts = [int(t) for t in args.threads.split(",")]
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]

    rows = []
    for name in models:
        try:
            t = time.perf_counter()
            model_dir = export(name, args.cache)
            took = time.perf_counter() - t
            if took > 1:
                print(f"exported {name} in {took:.1f} s -> {model_dir}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001
            msg = f"export failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            for th in thread_counts:
                rows.append({"model": name, "threads": th, "ours": {"error": msg}, "ort": {"error": msg},
                             "peers": {p: {"error": msg} for p in peers}})
            continue
        for th in thread_counts:
            print(f"{name}, {th} thread(s) ...", file=sys.stderr)
            o = ours(args.bin, model_dir, th, args.runs, args.warmup, args.timeout)
            r = onnxruntime_side(model_dir, th, args.runs, args.warmup)
            pr = {p: ours(args.bin, model_dir, th, args.runs, args.warmup, args.timeout, p) for p in peers}
            tw = tract_side(model_dir, args.runs, args.warmup) if args.tract_wheel and th == 1 else None
            rows.append({"model": name, "threads": th, "ours": o, "ort": r, "peers": pr, "tract_wheel": tw})

    print(f"\n{args.runs} timed runs after {args.warmup} warm-up, medians; ratio = ours / ORT\n")
    extra = "".join(f" bench --backend {p} median ms |" for p in peers)
    if args.tract_wheel:
        extra += " tract wheel median ms | ours / tract |"
    ncols = len(peers) + (2 if args.tract_wheel else 0)
    print(f"| model | threads | ours median ms | ORT median ms | ratio |{extra} note |")
    print("|---|---|---|---|---|" + "---|" * ncols + "---|")
    for row in rows:
        o, r = row["ours"], row["ort"]
        ours_ms = f"{o['median_ms']:.2f}" if "median_ms" in o else "—"
        ort_ms = f"{r['median_ms']:.2f}" if "median_ms" in r else "—"
        ratio = f"{o['median_ms'] / r['median_ms']:.2f}" if "median_ms" in o and "median_ms" in r else "—"
        notes = []
        if "error" in o:
            notes.append(f"ours cannot run it: {o['error']}")
        elif o.get("threads_effective", row["threads"]) != row["threads"]:
            notes.append(f"ours used {o['threads_effective']} thread(s)")
        if "error" in r:
            notes.append(f"ORT: {r['error']}")
        cells = ""
        for p in peers:
            q = row["peers"][p]
            cells += f" {q['median_ms']:.2f} |" if "median_ms" in q else " — |"
            if "error" in q:
                notes.append(f"{p}: {q['error']}")
        if args.tract_wheel:
            tw = row.get("tract_wheel")
            if tw is None:
                cells += " | |"
            elif "median_ms" in tw:
                rt = f"{o['median_ms'] / tw['median_ms']:.2f}" if "median_ms" in o else "—"
                cells += f" {tw['median_ms']:.2f} | {rt} |"
            else:
                cells += " — | — |"
                notes.append(f"tract: {tw['error']}")
        print(f"| {row['model']} | {row['threads']} | {ours_ms} | {ort_ms} | {ratio} |{cells} {'; '.join(notes)} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
