#!/usr/bin/env python3
"""Speed check for `onnx-doctor lint` (issue 7): lint every Python file of an installed `torch`
package and compare the whole-process wall time with `ruff check --select E9` on the same tree.

    pip install torch ruff            # torch only needs to be installed, not imported
    cargo build --release -p cli
    python3 scripts/bench_lint.py [--binary target/release/onnx-doctor] [--runs 5] [--max-ratio 2.0]

Both tools see the same files (`*.py` and `*.pyi` under the torch package directory) and run
from a temporary directory, ruff with `--isolated` (no project configuration). Two comparisons,
in the same run:

- cold: both with `--no-cache`, every file parsed and checked;
- warm: both with a cache directory of their own, filled by a first run (what a second
  `ruff check` in the same directory does by default; `onnx-doctor lint` caches the same way).

Each command runs once to warm the file cache (and fill the tool's cache), then `--runs` times,
the four commands in turn; the medians are compared. Exit status 1 when either ratio exceeds
--max-ratio. Not run in CI: it needs torch (hundreds of MB) installed.
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
    ruff_version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()

    import json

    with tempfile.TemporaryDirectory() as cwd:
        lint = [str(Path(binary).resolve()), "lint", str(tree), "--format", "json"]
        check = [ruff, "check", "--isolated", "--exit-zero", "--select", "E9",
                 "--output-format", "concise", str(tree)]
        commands = {
            "ours cold": lint + ["--no-cache"],
            "ruff cold": check + ["--no-cache"],
            "ours warm": lint + ["--cache-dir", str(Path(cwd) / "onnx-doctor-cache")],
            "ruff warm": check + ["--cache-dir", str(Path(cwd) / "ruff-cache")],
        }
        for cmd in commands.values():
            timed(cmd, cwd)
        times = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                times[name].append(timed(cmd, cwd))
        # What lint found, cold and warm, for the record: the cache must not change it.
        found = [subprocess.run(commands[k], cwd=cwd, capture_output=True, text=True).stdout
                 for k in ("ours cold", "ours warm")]
    if found[0] != found[1]:
        sys.exit("bench_lint: the cached run reported other findings than the uncached one")

    summary = json.loads(found[0])["summary"]
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"tree:        {tree} ({files} .py/.pyi files, {os.cpu_count()} CPUs)")
    print(f"findings:    {summary['error']} errors, {summary['warning']} warnings, "
          f"{summary['info']} infos in {summary['files']} files (same with and without the cache)")
    print(f"ruff:        {ruff_version} --select E9")
    worst = 0.0
    for mode in ("cold", "warm"):
        ours, theirs = median[f"ours {mode}"], median[f"ruff {mode}"]
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(f"{mode}: onnx-doctor median {ours:.3f} s (min {min(times[f'ours {mode}']):.3f}), "
              f"ruff median {theirs:.3f} s (min {min(times[f'ruff {mode}']):.3f}) "
              f"over {args.runs} runs: ratio {ratio:.2f} (limit {args.max_ratio})")
    sys.exit(0 if worst <= args.max_ratio else 1)


if __name__ == "__main__":
    main()
