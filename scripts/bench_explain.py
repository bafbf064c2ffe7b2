#!/usr/bin/env python3
"""Cost of one `onnx-doctor explain` call: whole-process wall time and peak memory over real
messages (the fixtures of crates/source-lint/tests/fixtures/explain_cases.toml), optionally
side by side with another build of the binary (an older release, say) with the ratio.

    cargo build --release -p cli
    python3 scripts/bench_explain.py [--binary target/release/onnx-doctor] [--baseline OTHER_BINARY]
                                     [--messages 40] [--log-mb 0]

Every --messages-th fixture is taken (spread over the file, so over the error families). Each
binary explains each message once to warm the file cache, then once more timed; the two binaries
alternate message by message so machine noise hits both. Prints the median and the largest
wall time and the largest peak RSS of each, and the ratios baseline/binary. Each call runs under
bench_load.py's small wrapper process: a child spawned straight from this script would report this
script's own size (the parsed fixtures, about 50 MiB) as its peak, since Linux folds the spawning
process's high-water mark into the child's ru_maxrss at exec.

--log-mb N puts each message at the end of a log of N MB (a training/export log's progress
lines, none of them an error), as when a whole CI or console log is passed to `explain`.
"""

import argparse
import os
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import measure

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates/source-lint/tests/fixtures/explain_cases.toml"


def run(binary: str, path: str) -> tuple[float, int]:
    """Wall seconds and peak RSS in KiB of `binary explain --format json path`, measured in a
    fresh small process (see bench_load.measure)."""
    wall, rss, _floor, _out = measure([os.path.abspath(binary), "explain", "--format", "json", path])
    return wall, rss // 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(ROOT / "target/release/onnx-doctor"))
    ap.add_argument("--baseline", help="another onnx-doctor binary to compare with")
    ap.add_argument("--messages", type=int, default=40, help="how many fixture messages")
    ap.add_argument("--log-mb", type=float, default=0,
                    help="put each message at the end of a log this many MB long")
    args = ap.parse_args()
    binaries = [args.binary] + ([args.baseline] if args.baseline else [])
    for b in binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"bench_explain: {b}: not an executable (build it: cargo build --release -p cli)")
    cases = tomllib.loads(FIXTURES.read_text())["case"]
    step = max(1, len(cases) // args.messages)
    picked = cases[::step][: args.messages]
    log = ""
    if args.log_mb > 0:
        lines, size, i = [], 0, 0
        while size < args.log_mb * 1e6:
            line = (f"[I] step {i}: loaded layer encoder.layers.{i % 48}.mlp.fc{i % 2 + 1} "
                    f"weight shape ({64 * (i % 7 + 1)}, {32 * (i % 5 + 1)}) in {i % 97} ms\n")
            lines.append(line)
            size += len(line)
            i += 1
        log = "".join(lines)
    times = {b: [] for b in binaries}
    rss = {b: [] for b in binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for i, c in enumerate(picked):
            path = os.path.join(tmp, f"{i}.txt")
            Path(path).write_text(log + c["text"])
            for b in binaries:
                run(b, path)
            for b in binaries:
                t, m = run(b, path)
                times[b].append(t)
                rss[b].append(m)
    print(f"{len(picked)} messages of {len(cases)} fixtures"
          + (f", each after a {args.log_mb:g} MB log" if log else ""))
    for b in binaries:
        print(f"{b}: median {statistics.median(times[b]):.3f} s, max {max(times[b]):.3f} s, "
              f"peak RSS {max(rss[b]) / 1024:.1f} MiB")
    if args.baseline:
        tb, tn = statistics.median(times[args.baseline]), statistics.median(times[args.binary])
        mb, mn = max(rss[args.baseline]), max(rss[args.binary])
        print(f"baseline/binary: time {tb / tn:.1f}x, peak memory {mb / mn:.1f}x")


if __name__ == "__main__":
    main()
