#!/usr/bin/env python3
"""False-positive rate of `onnx-doctor lint` on code that exports fine (issue 7's clean-code bar:
at most 1 false positive per 1000 lines on torchvision's model sources).

    cargo build --release -p cli
    python3 scripts/lint_clean_corpus.py [--binary target/release/onnx-doctor] [--show]
        [--package torchvision==0.29.2:torchvision/models,torchvision/ops] [--max-per-kloc 1.0]

Downloads each package's wheel from PyPI with `pip download --no-deps` (no install, no torch
needed) into a cache directory, unpacks it, lints the listed sub-directories with
`--format json` and prints findings per 1000 lines (all lines of the `.py` files, as `wc -l`
counts them) per directory and per rule code. `--show` lists every finding. Exit status 1 when a
directory of the first package exceeds --max-per-kloc.

Every finding on these trees counts as a false positive here, although some are the rules doing
what the issue asks (torchvision's detection post-processing does call one-argument
`torch.where`, MaxViT does call `einsum`): the number is an upper bound.
"""

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_PACKAGES = [
    "torchvision==0.29.2:torchvision/models,torchvision/ops",
    "timm==1.0.31:timm/models,timm/layers",
]


def fetch(spec: str, cache: Path) -> Path:
    """Unpacked wheel directory for `name==version`."""
    out = cache / spec.replace("==", "-")
    if out.is_dir():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, spec],
            check=True,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            sys.exit(f"lint_clean_corpus: expected one wheel for {spec}, got {wheels}")
        partial = cache / (out.name + ".partial")
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(partial)
        partial.rename(out)
    return out


def count_lines(d: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in d.rglob("*.py"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/onnx-doctor")
    ap.add_argument("--package", action="append", help="NAME==VERSION:DIR[,DIR...] (repeatable)")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "onnx-doctor-clean-corpus"))
    ap.add_argument("--show", action="store_true", help="list every finding")
    ap.add_argument("--max-per-kloc", type=float, default=1.0)
    args = ap.parse_args()
    binary = Path(args.binary).resolve()
    if not binary.is_file():
        sys.exit(f"lint_clean_corpus: no binary at {binary} (cargo build --release -p cli)")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    status = 0
    print(f"{'directory':<28} {'lines':>7} {'findings':>8} {'per 1000':>8}  by code")
    for n, pkg in enumerate(args.package or DEFAULT_PACKAGES):
        spec, _, dirs = pkg.partition(":")
        root = fetch(spec, cache)
        for sub in dirs.split(","):
            d = root / sub
            if not d.is_dir():
                sys.exit(f"lint_clean_corpus: {spec} has no directory {sub}")
            proc = subprocess.run(
                [str(binary), "lint", str(d), "--format", "json", "--no-cache"], capture_output=True, text=True
            )
            if proc.returncode not in (0, 1):
                sys.exit(f"lint_clean_corpus: lint {d} failed ({proc.returncode}): {proc.stderr}")
            diags = json.loads(proc.stdout)["diagnostics"]
            lines = count_lines(d)
            rate = 1000 * len(diags) / lines
            by_code = collections.Counter(x["code"] for x in diags)
            codes = " ".join(f"{c}:{k}" for c, k in sorted(by_code.items()))
            print(f"{spec.split('==')[0] + '/' + sub.split('/', 1)[-1]:<28} {lines:>7} {len(diags):>8} {rate:>8.2f}  {codes}")
            if args.show:
                for x in diags:
                    rel = Path(x["file"]).resolve().relative_to(root)
                    print(f"    {rel}:{x['line']}: {x['code']} {x['message']}")
            if n == 0 and rate > args.max_per_kloc:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
