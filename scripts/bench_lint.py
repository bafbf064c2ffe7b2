#!/usr/bin/env python3
"""Speed check for `onnx-doctor lint` (issue 7): lint every Python file of an installed `torch`
package and compare the whole-process wall time with `ruff check --select E9` on the same tree.

    pip install torch ruff            # torch only needs to be installed, not imported
    cargo build --release -p cli
    python3 scripts/bench_lint.py [--binary target/release/onnx-doctor] [--runs 5] [--max-ratio 2.0]

Both tools see the same files (`*.py` and `*.pyi` under the torch package directory). ruff runs
with `--no-cache` (onnx-doctor keeps no cache) and `--isolated` (no project configuration), from
a temporary directory. Each tool runs once to warm the file cache, then `--runs` times
alternately; the medians are compared. Exit status 1 when the ratio exceeds --max-ratio.
Not run in CI: it needs torch (hundreds of MB) installed.
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench_lint: torch is not installed (pip install torch); nothing to lint")
    return Path(list(spec.submodule_search_locations)[0])


def timed(cmd, cwd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    # lint exits 1 when it reports errors; ruff with --exit-zero exits 0. Anything else failed.
    if proc.returncode not in (0, 1):
        sys.exit(f"bench_lint: {cmd[0]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def count_files(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.suffix in (".py", ".pyi") and p.is_file())


def main() -> None:
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("ONNX_DOCTOR"),
                    help="onnx-doctor binary (default: target/release/onnx-doctor, or $CARGO_TARGET_DIR/release)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args()

    binary = args.binary
    if binary is None:
        target = Path(os.environ.get("CARGO_TARGET_DIR", repo / "target"))
        binary = str(target / "release" / "onnx-doctor")
    if not Path(binary).is_file():
        sys.exit(f"bench_lint: {binary} not found: build it with `cargo build --release -p cli`")
    ruff = shutil.which("ruff")
    if ruff is None:
        sys.exit("bench_lint: ruff not found (pip install ruff)")

    tree = torch_dir()
    files = count_files(tree)
    lint_cmd = [str(Path(binary).resolve()), "lint", str(tree), "--format", "json"]
    ruff_cmd = [ruff, "check", "--isolated", "--no-cache", "--exit-zero", "--select", "E9",
                "--output-format", "concise", str(tree)]
    ruff_version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()

    with tempfile.TemporaryDirectory() as cwd:
        timed(lint_cmd, cwd)
        timed(ruff_cmd, cwd)
        ours, theirs = [], []
        for _ in range(args.runs):
            ours.append(timed(lint_cmd, cwd))
            theirs.append(timed(ruff_cmd, cwd))
        # What lint found, for the record (same command, one more run).
        out = subprocess.run(lint_cmd, cwd=cwd, capture_output=True, text=True).stdout

    import json

    summary = json.loads(out)["summary"]
    t_ours, t_ruff = statistics.median(ours), statistics.median(theirs)
    ratio = t_ours / t_ruff
    print(f"tree:        {tree} ({files} .py/.pyi files, {os.cpu_count()} CPUs)")
    print(f"onnx-doctor: median {t_ours:.3f} s over {args.runs} runs "
          f"(min {min(ours):.3f}); {summary['error']} errors, {summary['warning']} warnings, "
          f"{summary['info']} infos in {summary['files']} files")
    print(f"{ruff_version} --select E9 --no-cache: median {t_ruff:.3f} s (min {min(theirs):.3f})")
    print(f"ratio onnx-doctor / ruff = {ratio:.2f} (limit {args.max_ratio})")
    sys.exit(0 if ratio <= args.max_ratio else 1)


if __name__ == "__main__":
    main()
