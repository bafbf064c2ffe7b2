#!/usr/bin/env python3
"""Load benchmark: `onnx-doctor inspect MODEL --format json` versus Python `onnx.load`.

1. Builds a ViT-B/16-sized model (12 transformer blocks, ~86 M float32 parameters, ~345 MB of
   initializers, ~1100 nodes, opset 17, passes onnx.checker) at --model (reused if present; default
   a cache directory under the system temp dir), plus an external-data copy next to it
   (`<stem>_ext.onnx` + `<stem>_ext.onnx.data`).
2. For each variant, runs each side several times in a fresh child process and takes the median
   wall time and the median peak RSS. Peak RSS is that child's own `ru_maxrss`, read with
   os.wait4 on its pid, so every measurement is one process and nothing else. The onnx side is
   `python3 -c 'onnx.load(path)' + counting nodes/initializers/parameters`, interpreter start-up
   and `import onnx` included, as ours includes process start-up: whole process against whole
   process. One unmeasured warm-up run per side first, so both read from a warm page cache.
3. Prints a table: file size, ours vs onnx (times and ratios), and whether our peak RSS is below
   the file size.
4. Checks that our JSON's nodes / initializers / parameters equal what onnx counts; exits 1 if not.

Usage:
    cargo build --release -p cli
    python3 scripts/bench_load.py [--bin target/release/onnx-doctor] [--model PATH] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HIDDEN = 768
MLP = 3072
HEADS = 12
LAYERS = 12
PATCH = 16
IMAGE = 224
CLASSES = 1000
OPSET = 17


# --------------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------------


def build_vit(path: Path) -> None:
    """Writes a ViT-B/16-shaped model, exported-from-torch style (dynamic batch, reshapes whose
    target shape is computed with Shape/Gather/Unsqueeze/Concat, Constant nodes, erf GELU)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes: list = []
    inits: list = []
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def weight(name: str, shape: tuple[int, ...], scale: float = 0.02) -> str:
        a = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)
        inits.append(numpy_helper.from_array(a, name))
        return name

    def ones(name: str, n: int) -> str:
        inits.append(numpy_helper.from_array(np.ones(n, np.float32), name))
        return name

    def zeros(name: str, n: int) -> str:
        inits.append(numpy_helper.from_array(np.zeros(n, np.float32), name))
        return name

    def node(op: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str]:
        outs = [fresh(op.lower()) for _ in range(n_out)]
        nodes.append(helper.make_node(op, inputs, outs, name=fresh(f"/{op}"), **attrs))
        return outs

    def one(op: str, inputs: list[str], **attrs) -> str:
        return node(op, inputs, **attrs)[0]

    def const_i64(values: list[int], scalar: bool = False) -> str:
        arr = np.array(values[0] if scalar else values, dtype=np.int64)
        return one("Constant", [], value=numpy_helper.from_array(arr))

    def const_f32(value: float) -> str:
        return one("Constant", [], value=numpy_helper.from_array(np.array(value, np.float32)))

    def dim_of(x: str, axis: int) -> str:
        """Shape(x)[axis] as a 1-D tensor, the way torch.onnx exports x.size(axis)."""
        shape = one("Shape", [x])
        g = one("Gather", [shape, const_i64([axis], scalar=True)], axis=0)
        return one("Unsqueeze", [g, const_i64([0])])

    def dyn_reshape(x: str, tail: list[int]) -> str:
        """Reshape x to [x.size(0), x.size(1), *tail] with a computed shape."""
        parts = [dim_of(x, 0), dim_of(x, 1)] + [const_i64([t]) for t in tail]
        return one("Reshape", [x, one("Concat", parts, axis=0)])

    def linear(x: str, prefix: str, n_in: int, n_out: int) -> str:
        w = weight(f"{prefix}.weight", (n_in, n_out))
        b = zeros(f"{prefix}.bias", n_out)
        return one("Add", [one("MatMul", [x, w]), b])

    def layer_norm(x: str, prefix: str) -> str:
        return one(
            "LayerNormalization",
            [x, ones(f"{prefix}.weight", HIDDEN), zeros(f"{prefix}.bias", HIDDEN)],
            axis=-1,
            epsilon=1e-6,
        )

    def gelu(x: str) -> str:
        # 0.5 * x * (1 + erf(x / sqrt(2))), as torch exports nn.GELU at opset 17
        e = one("Erf", [one("Div", [x, const_f32(1.4142135381698608)])])
        return one("Mul", [one("Mul", [x, one("Add", [e, const_f32(1.0)])]), const_f32(0.5)])

    head_dim = HIDDEN // HEADS

    def attention(x: str, prefix: str) -> str:
        def heads(t: str) -> str:
            r = dyn_reshape(t, [HEADS, head_dim])
            return one("Transpose", [r], perm=[0, 2, 1, 3])

        q = heads(linear(x, f"{prefix}.query", HIDDEN, HIDDEN))
        k = heads(linear(x, f"{prefix}.key", HIDDEN, HIDDEN))
        v = heads(linear(x, f"{prefix}.value", HIDDEN, HIDDEN))
        kt = one("Transpose", [k], perm=[0, 1, 3, 2])
        scores = one("Div", [one("MatMul", [q, kt]), const_f32(float(np.sqrt(head_dim)))])
        probs = one("Softmax", [scores], axis=-1)
        ctx = one("Transpose", [one("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        merged = dyn_reshape(ctx, [HIDDEN])
        return linear(merged, f"{prefix}.output", HIDDEN, HIDDEN)

    # patch embedding
    x = "pixel_values"
    conv = one(
        "Conv",
        [
            x,
            weight("embeddings.patch.weight", (HIDDEN, 3, PATCH, PATCH)),
            zeros("embeddings.patch.bias", HIDDEN),
        ],
        kernel_shape=[PATCH, PATCH],
        strides=[PATCH, PATCH],
    )
    b = dim_of(conv, 0)
    flat = one("Reshape", [conv, one("Concat", [b, const_i64([HIDDEN]), const_i64([-1])], axis=0)])
    tokens = one("Transpose", [flat], perm=[0, 2, 1])
    cls = weight("embeddings.cls_token", (1, 1, HIDDEN))
    cls_b = one("Expand", [cls, one("Concat", [dim_of(conv, 0), const_i64([1, HIDDEN])], axis=0)])
    seq = one("Concat", [cls_b, tokens], axis=1)
    n_tokens = (IMAGE // PATCH) ** 2 + 1
    h = one("Add", [seq, weight("embeddings.position", (1, n_tokens, HIDDEN))])

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        a = attention(layer_norm(h, f"{p}.ln_before"), f"{p}.attention")
        h = one("Add", [h, a])
        m = linear(layer_norm(h, f"{p}.ln_after"), f"{p}.mlp.fc1", HIDDEN, MLP)
        m = linear(gelu(m), f"{p}.mlp.fc2", MLP, HIDDEN)
        h = one("Add", [h, m])

    h = layer_norm(h, "layernorm")
    first = one("Gather", [h, const_i64([0], scalar=True)], axis=1)
    logits = linear(first, "classifier", HIDDEN, CLASSES)
    nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/output"))

    graph = helper.make_graph(
        nodes,
        "vit_b16_like",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="onnx-doctor bench_load.py",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    onnx.save(model, tmp)
    os.replace(tmp, path)


def build_external(src: Path, dst: Path) -> None:
    import onnx

    model = onnx.load(src)
    data = dst.name + ".data"
    for stale in (dst, dst.with_name(data)):
        stale.unlink(missing_ok=True)
    onnx.save(
        model,
        dst,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data,
        size_threshold=1024,
    )
    onnx.checker.check_model(str(dst))


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------

ONNX_SIDE = r"""
import json, sys, onnx
m = onnx.load(sys.argv[1])
g = m.graph
params = 0
for t in g.initializer:
    n = 1
    for d in t.dims:
        n *= max(d, 0)
    params += n
print(json.dumps({"nodes": len(g.node), "initializers": len(g.initializer), "parameters": params}))
"""


# Runs one command and reports its wall time and its own peak RSS. It runs in a fresh, small
# interpreter (-S -I: no site imports) because Linux carries the peak RSS of the forking process
# over into the child: at exec, the old address space's high-water mark is folded into the
# child's ru_maxrss, so spawning straight from this (large, model-building) process would report
# at least this process's size for every measurement. Even the wrapper passes on its own peak
# (~10 MiB), reported as `floor`: a measured RSS at the floor means "at most this much".
# RSS counts mapped file pages too: a memory-mapped model shows up to the pages the kernel mapped
# around every touched spot (with large page-cache folios, hundreds of KiB per touch), which are
# shared, clean page cache, not allocations.
WRAPPER = r"""
import json, os, resource, sys, time
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
err = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
try:  # this process's own high-water mark (ru_maxrss would include what it inherited too)
    floor = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
except (OSError, IndexError, ValueError):
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
pid = os.posix_spawn(sys.argv[3], sys.argv[3:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "maxrss_kib": usage.ru_maxrss, "floor_kib": floor,
                  "rc": os.waitstatus_to_exitcode(status)}))
"""


def measure(cmd: list[str]) -> tuple[float, int, int, str]:
    """Runs cmd (absolute program path first) under WRAPPER in a fresh process; returns
    (wall seconds, peak RSS bytes, RSS floor bytes, stdout)."""
    with tempfile.TemporaryDirectory() as d:
        out, err = Path(d, "out"), Path(d, "err")
        rep = subprocess.run(
            [sys.executable, "-S", "-I", "-c", WRAPPER, str(out), str(err), *cmd],
            capture_output=True, text=True, check=True,
        )
        r = json.loads(rep.stdout)
        if r["rc"] != 0:
            sys.exit(f"command failed ({r['rc']}): {' '.join(cmd)}\n{err.read_text()}")
        stdout = out.read_text()
    kib = 1 if sys.platform != "darwin" else 1 / 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return r["wall"], int(r["maxrss_kib"] * kib * 1024), int(r["floor_kib"] * kib * 1024), stdout


def bench(cmd: list[str], runs: int) -> dict:
    measure(cmd)  # warm-up: page cache, not counted
    walls, rsss, floors, out = [], [], [], ""
    for _ in range(runs):
        w, r, f, out = measure(cmd)
        walls.append(w)
        rsss.append(r)
        floors.append(f)
    return {
        "floor": max(floors),
        "wall": statistics.median(walls),
        "wall_min": min(walls),
        "rss": statistics.median(rsss),
        "rss_max": max(rsss),
        "stdout": out,
    }


def mib(n: float) -> str:
    return f"{n / 2**20:8.1f} MiB"


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(root / "target/release/onnx-doctor"), help="onnx-doctor binary")
    ap.add_argument(
        "--model",
        default=str(Path(tempfile.gettempdir()) / "onnx-doctor-bench" / "vit_b16_like.onnx"),
        help="where the model is (built there if missing)",
    )
    ap.add_argument("--runs", type=int, default=5, help="measured runs per side and variant (median)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the model even if present")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()

    bin_path = Path(args.bin).resolve()
    if not bin_path.is_file():
        sys.exit(f"{bin_path} not found: build it with `cargo build --release -p cli` or pass --bin")
    model = Path(args.model)
    ext = model.with_name(model.stem + "_ext.onnx")
    ext_data = ext.with_name(ext.name + ".data")

    if args.rebuild or not model.is_file():
        print(f"building {model} ...", file=sys.stderr)
        t = time.perf_counter()
        build_vit(model)
        print(f"  built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if args.rebuild or not (ext.is_file() and ext_data.is_file()) or ext.stat().st_mtime < model.stat().st_mtime:
        print(f"writing external-data copy {ext} ...", file=sys.stderr)
        build_external(model, ext)

    variants = [
        ("single file", model, model.stat().st_size),
        ("external data", ext, ext.stat().st_size + ext_data.stat().st_size),
    ]
    results = []
    ok = True
    for label, path, size in variants:
        print(f"measuring {label}: {path} ({runs_note(args.runs)})", file=sys.stderr)
        ours = bench([str(bin_path), "inspect", str(path), "--format", "json"], args.runs)
        theirs = bench([sys.executable, "-c", ONNX_SIDE, str(path)], args.runs)
        ours_facts = json.loads(ours.pop("stdout"))
        theirs_facts = json.loads(theirs.pop("stdout"))
        facts = {k: (ours_facts.get(k), theirs_facts[k]) for k in ("nodes", "initializers", "parameters")}
        same = all(a == b for a, b in facts.values())
        ok &= same
        results.append(
            {"variant": label, "path": str(path), "size": size, "ours": ours, "onnx": theirs,
             "facts": facts, "facts_equal": same}
        )

    print()
    print(f"onnx-doctor: {bin_path}")
    print(f"runs: {args.runs} per side (median), after one warm-up run; whole process each")
    floor = max(max(r["ours"]["floor"], r["onnx"]["floor"]) for r in results)
    print(f"RSS measurement floor (the measuring wrapper's own peak): {mib(floor).strip()}")
    print()
    hdr = f"{'variant':<14} {'file size':>12} | {'ours wall':>9} {'onnx wall':>9} {'ours/onnx':>9} | " \
          f"{'ours RSS':>12} {'onnx RSS':>12} {'ours/onnx':>9} | {'ours RSS < size':>15}"
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        o, t = r["ours"], r["onnx"]
        print(
            f"{r['variant']:<14} {mib(r['size']):>12} | {o['wall'] * 1e3:7.1f}ms {t['wall'] * 1e3:7.1f}ms "
            f"{o['wall'] / t['wall']:9.3f} | {rss_cell(o):>12} {rss_cell(t):>12} "
            f"{o['rss'] / t['rss']:9.3f} | {'yes' if o['rss'] < r['size'] else 'NO':>15}"
        )
    print()
    for r in results:
        f = r["facts"]
        status = "equal" if r["facts_equal"] else "DIFFERENT"
        print(
            f"{r['variant']:<14} facts {status}: nodes {f['nodes'][0]} / {f['nodes'][1]}, "
            f"initializers {f['initializers'][0]} / {f['initializers'][1]}, "
            f"parameters {f['parameters'][0]} / {f['parameters'][1]}  (ours / onnx)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


def rss_cell(r: dict) -> str:
    """The median peak RSS, or `<=floor` when it is not above what the wrapper passes on."""
    if r["rss"] <= r["floor"] * 1.02:
        return "<=" + mib(r["floor"]).strip()
    return mib(r["rss"])


def runs_note(runs: int) -> str:
    return f"1 warm-up + {runs} runs per side"


if __name__ == "__main__":
    sys.exit(main())
