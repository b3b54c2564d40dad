#!/usr/bin/env python3
"""Offline dependency checks in the spirit of cargo-deny, run by `make lint`.

    scripts/deny.py

Over every package cargo resolves for the platforms we build (the host, and
x86_64 / aarch64 musl), read with `cargo metadata --offline --locked`:

  sources   every package is from crates.io or a path in this repository
            (no git, no other registry);
  licences  every licence expression is satisfiable with the ALLOWED licences
            (SPDX OR / AND / WITH and parentheses; the old `A/B` form is OR);
  bans      no BANNED crate (async runtimes, OpenSSL, the dead crates the design
            card's successors replaced);
  duplicates  crates linked into the binary in two versions are listed; one not
            in DUPLICATES_KNOWN (with its reason) fails the check, so a new one is
            seen in review.

Exits 1 with every finding listed, else prints a one-line summary.
"""

import collections
import re
import sys

import cargo_graph

TARGETS = ["x86_64-unknown-linux-gnu", "x86_64-unknown-linux-musl",
           "aarch64-unknown-linux-musl"]

ALLOWED = {"MIT", "MIT-0", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause",
           "Zlib", "Unlicense", "BSL-1.0", "Unicode-3.0", "CC0-1.0",
           "LLVM-exception"}

# name -> why it must not be in the tree.
BANNED = {
    "tokio": "async runtime (the design is synchronous and thread-based)",
    "async-std": "async runtime",
    "smol": "async runtime",
    "futures-executor": "async runtime",
    "openssl": "TLS is rustls with ring",
    "openssl-sys": "TLS is rustls with ring",
    "native-tls": "TLS is rustls with ring",
    "serde_yaml": "archived; yaml_serde is the maintained successor",
    "jaq-interpret": "dead jaq 1.x line; jaq-core 3 replaces it",
    "tiny_http": "its TLS feature brings rustls 0.20; src/listen/ replaced it",
}

# Linked-in crates allowed in two versions, and why (docs/dependencies.md).
DUPLICATES_KNOWN = {
    "base64": "jaq-std 3.0 (@base64) uses 0.22; ureq 3.5 and we (kubeconfig) use 0.23",
    "foldhash": "jaq-json 2.0 uses 0.1; hashbrown 0.17 (indexmap's) uses 0.2",
    "getrandom": "ahash needs 0.3, ring 0.17 still uses 0.2",
}


def satisfiable(expr):
    """Whether an SPDX expression can be met with ALLOWED licences only."""
    tokens = re.findall(r"\(|\)|[^\s()]+", expr.replace("/", " OR "))
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom():
        if peek() == "(":
            take()
            value = any_of()
            if take() != ")":
                raise ValueError(f"unbalanced parentheses in {expr!r}")
            return value
        value = take() in ALLOWED
        if peek() == "WITH":
            take()
            value = value and take() in ALLOWED
        return value

    def all_of():
        value = atom()
        while peek() == "AND":
            take()
            value = atom() and value
        return value

    def any_of():
        value = all_of()
        while peek() == "OR":
            take()
            value = all_of() or value
        return value

    result = any_of()
    if peek() is not None:
        raise ValueError(f"unexpected {peek()!r} in {expr!r}")
    return result


def check():
    """Every finding, as lines; and the counts for the summary."""
    findings, packages, linked = [], {}, {}
    for target in TARGETS:
        meta = cargo_graph.metadata(target)
        for p in meta["packages"]:
            packages[p["id"]] = p
        for p in cargo_graph.linked(meta):
            linked[p["id"]] = p
    for p in sorted(packages.values(), key=lambda p: (p["name"], p["version"])):
        label = f"{p['name']} {p['version']}"
        if p["source"] not in (None, cargo_graph.CRATES_IO):
            findings.append(f"source: {label} comes from {p['source']}")
        licence = p.get("license")
        if not licence:
            findings.append(f"licence: {label} declares none")
        elif not satisfiable(licence):
            findings.append(f"licence: {label} is {licence!r}, not within {sorted(ALLOWED)}")
        if p["name"] in BANNED:
            findings.append(f"banned: {label}: {BANNED[p['name']]}")
    versions = collections.defaultdict(set)
    for p in linked.values():
        versions[p["name"]].add(p["version"])
    dups = {n: sorted(v) for n, v in versions.items() if len(v) > 1}
    for name, vs in sorted(dups.items()):
        why = DUPLICATES_KNOWN.get(name)
        print(f"duplicate: {name} {', '.join(vs)}: {why or 'UNEXPLAINED'}")
        if why is None:
            findings.append(f"duplicate: {name} {', '.join(vs)} is linked in; "
                            "remove one or explain it in DUPLICATES_KNOWN")
    return findings, len(packages), len(linked), len(dups)


def main():
    findings, total, linked, dups = check()
    for f in findings:
        print(f"deny: {f}", file=sys.stderr)
    if findings:
        sys.exit(1)
    print(f"deny: ok: {total} packages (sources, licences, bans), "
          f"{linked} linked in, {dups} known duplicates")


if __name__ == "__main__":
    main()
