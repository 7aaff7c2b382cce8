#!/usr/bin/env python3
"""The stated toolchain is true (CI's fast stage).

The root package's `rust-version` must be at least the highest
`rust-version` among the crates Cargo.lock pins (read from `cargo metadata
--locked`), every crate of the workspace must inherit that same value, and
the README's "Rust X or later" must name it. Exits non-zero, saying which
crate needs more, when any of these is false.
"""
import json
import re
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split("."))


def main():
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        check=True, capture_output=True, text=True).stdout)
    ours = set(meta["workspace_members"])
    needed = max(
        ((version(p["rust_version"]), p["name"], p["rust_version"])
         for p in meta["packages"] if p["id"] not in ours and p.get("rust_version")),
        default=((0,), "nothing", "0"))
    problems = []
    stated = {}
    for p in meta["packages"]:
        if p["id"] in ours:
            stated[p["name"]] = p.get("rust_version")
    root = stated.get("janus-registration")
    if root is None:
        problems.append("Cargo.toml declares no rust-version")
    else:
        if version(root) < needed[0]:
            problems.append(f"rust-version {root} is below what {needed[1]} needs ({needed[2]})")
        for name, value in sorted(stated.items()):
            if value != root:
                problems.append(f"{name} declares rust-version {value}, the workspace {root}")
        readme = open("README.md", encoding="utf-8").read()
        said = re.findall(r"Rust (\d+\.\d+(?:\.\d+)?) or later", readme)
        if said != [root]:
            problems.append(f"README.md says Rust {said or 'nothing'} or later; Cargo.toml says {root}")
    for problem in problems:
        print(f"toolchain-check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"toolchain-check: rust-version {root} (the lock file's crates need {needed[2]}, for {needed[1]}); "
          "README says the same")


if __name__ == "__main__":
    main()
