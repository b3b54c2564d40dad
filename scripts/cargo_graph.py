"""The crates linked into the shell-operator binary, read from `cargo metadata`.

Shared by scripts/sbom.py (the bill of materials) and scripts/deny.py (the
offline dependency checks). "Linked in" means: reached from the shell-operator
package through normal dependency edges (not build or dev) that apply to the
target, minus proc-macros (they run in the compiler, their code is not in the
binary). The same set `cargo tree -e normal,no-proc-macro --target T` prints,
which build.rs counts and tests/shipping compares against.
"""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT_PACKAGE = "shell-operator"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def metadata(target=None):
    """`cargo metadata` for the workspace, offline and locked; filtered to
    `target`'s platform when given."""
    cmd = [os.environ.get("CARGO", "cargo"), "metadata", "--offline", "--locked",
           "--format-version", "1"]
    if target:
        cmd += ["--filter-platform", target]
    out = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE)
    return json.loads(out.stdout)


def linked(meta):
    """Package ids linked into the binary, per the module doc."""
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(p["id"] for p in meta["packages"]
                if p["name"] == ROOT_PACKAGE and p["source"] is None)
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in seen or is_proc_macro(packages[pid]):
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    return [packages[p] for p in sorted(seen)]


def is_proc_macro(package):
    """Whether the package's library is a proc-macro."""
    return any("proc-macro" in t["kind"] for t in package["targets"])


def lock_checksums():
    """(name, version) -> the SHA-256 Cargo.lock records for the .crate file."""
    sums, name, version, in_package = {}, None, None, False
    with open(os.path.join(ROOT, "Cargo.lock"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                in_package = line == "[[package]]"
                name = version = None
            elif not in_package:
                continue
            elif line.startswith("name = "):
                name = line.split('"')[1]
            elif line.startswith("version = "):
                version = line.split('"')[1]
            elif line.startswith("checksum = "):
                sums[(name, version)] = line.split('"')[1]
    return sums


def spdx(expression):
    """The licence field as an SPDX expression: the old `A/B` form means `A OR B`."""
    if not expression:
        return None
    parts = [p.strip() for p in expression.split("/")]
    return " OR ".join(parts)
