#!/usr/bin/env python3
"""Merge one branch's knowledge-base work into the checkout, entry by entry.

    git merge --no-ff --no-commit -s ours BRANCH
    python3 scripts/explain_kb_merge.py BRANCH [BASE]
    cargo test -p source-lint --test explain && git commit

Several branches that each append `[[entry]]` blocks to crates/source-lint/data/explain.toml and
`[[case]]` blocks to crates/source-lint/tests/fixtures/explain_cases.toml conflict at the end of both
files on every textual merge. This applies a branch's changes block by block instead: a block the
branch added (an entry id, or a case's whole text, not in BASE) is appended unless the checkout has
it already; an entry the branch edited is replaced in place when the checkout still holds BASE's
text. An entry edited on both sides, an id added on both sides with different text, or a block the
branch removed is reported and left as the checkout has it, and the exit status is 1. A case is
keyed by its source and text, so a branch that changes a case's `expect` edits it in place.

BASE defaults to `git merge-base HEAD BRANCH`, so the checkout's own changes since the branch was cut
(a fixture deleted as a duplicate, say) are not undone. Comment lines between blocks are kept as the
checkout has them; a new block is separated from the previous one by a blank line.
"""

import os
import re
import subprocess
import sys

FILES = {
    "crates/source-lint/data/explain.toml": "[[entry]]",
    "crates/source-lint/tests/fixtures/explain_cases.toml": "[[case]]",
}


def show(ref: str, path: str) -> str:
    return subprocess.check_output(["git", "show", f"{ref}:{path}"]).decode()


def split(text: str, header: str) -> tuple[str, list[str]]:
    """The text before the first block, and each block up to the next header."""
    parts = re.split(r"(?m)^(?=" + re.escape(header) + r"\s*$)", text)
    return parts[0], parts[1:]


def body(block: str) -> str:
    """A block without the blank and comment lines after it (comments start at column 0; a line
    holding a closing triple quote is part of a string, whatever it starts with)."""
    lines = block.rstrip("\n").split("\n")
    while lines and (
        not lines[-1].strip()
        or (lines[-1].startswith("#") and "'''" not in lines[-1] and '"""' not in lines[-1])
    ):
        lines.pop()
    return "\n".join(lines)


def key(block: str, header: str) -> str:
    if header == "[[entry]]":
        found = re.search(r'(?m)^id = "([^"]+)"', block)
        if not found:
            sys.exit(f"an [[entry]] without an id:\n{block[:200]}")
        return found.group(1)
    # A case is its source and text: a branch that changes which entry it expects edits it.
    return re.sub(r'(?m)^expect = .*\n', "", block)


def merge(path: str, header: str, branch: str, base: str) -> int:
    base_blocks = {key(b, header): b for b in map(body, split(show(base, path), header)[1])}
    branch_blocks = [body(b) for b in split(show(branch, path), header)[1]]
    prefix, raw = split(open(path, encoding="utf-8").read(), header)
    blocks = [body(b) for b in raw]
    tails = [b[len(body(b)):] for b in raw]
    index = {key(b, header): i for i, b in enumerate(blocks)}
    problems = added = edited = 0
    for block in branch_blocks:
        k = key(block, header)
        if k in base_blocks:
            if base_blocks[k] == block:
                continue
            i = index.get(k)
            if i is None:
                print(f"{path}: edited on {branch} but gone here: {k[:60]}")
                problems += 1
            elif blocks[i] == base_blocks[k]:
                blocks[i] = block
                edited += 1
            elif blocks[i] != block:
                print(f"{path}: edited on both sides, kept as here: {k[:60]}")
                problems += 1
        elif k in index:
            if blocks[index[k]] != block:
                print(f"{path}: added on both sides with different text, kept as here: {k[:60]}")
                problems += 1
        else:
            if blocks:
                tails[-1] = tails[-1].rstrip("\n") + "\n\n"
            blocks.append(block)
            tails.append("\n")
            index[k] = len(blocks) - 1
            added += 1
    kept = {key(b, header) for b in branch_blocks}
    for k in base_blocks:
        if k not in kept:
            print(f"{path}: removed on {branch}, not applied: {k[:60]}")
            problems += 1
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(prefix + "".join(b + t for b, t in zip(blocks, tails)))
    os.replace(tmp, path)
    print(f"{path}: {added} added, {edited} edited")
    return problems


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    branch = sys.argv[1]
    base = sys.argv[2] if len(sys.argv) == 3 else subprocess.check_output(
        ["git", "merge-base", "HEAD", branch]).decode().strip()
    problems = sum(merge(path, header, branch, base) for path, header in FILES.items())
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
