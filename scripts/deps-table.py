#!/usr/bin/env python3
"""Prints the dependency table of docs/dependencies.md (markdown).

    scripts/deps-table.py UNSTRIPPED_BINARY [TARGET]

For every crate linked into the binary (cargo_graph.py, for TARGET, default
x86_64-unknown-linux-musl): who brings it in, how many linked crates it pulls in
(itself excluded, shared ones counted for each), and its share of the machine
code, summed from the symbol table of an unstripped release build
(`nm --size-sort --demangle=rust`, each symbol given to the first crate named in
its demangled path; generic code lands in the crate that defines it, as
cargo-bloat does). Build the unstripped binary with:

    CARGO_PROFILE_RELEASE_STRIP=false CARGO_TARGET_DIR=target/unstripped \\
        scripts/static.sh amd64
"""

import collections
import re
import subprocess
import sys

import cargo_graph

IDENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::")

# Our direct dependencies, the design card's first, and why each is there.
WHY = {
    "ureq": "card: the Kubernetes REST + watch client's HTTP/1.1 (blocking, no async)",
    "rustls": "card: TLS for the API server and the webhook servers (ring provider)",
    "serde": "card: (de)serialisation of hook configs, contexts, Kubernetes types",
    "serde_json": "card: binding contexts, objects as Value, raw_value for the watch cache",
    "yaml_serde": "card (maintained serde_yaml): hook configs, values, kubeconfig, charts",
    "jaq-core": "card (successor of jaq-interpret): jqFilter and the jq CLI",
    "jaq-std": "card: jq's standard library definitions for jaq",
    "jaq-json": "card: jaq's JSON values and serde bridge",
    "cron": "card: crontab parsing behind src/schedule/cron.rs",
    "crossbeam-channel": "card: every channel between threads (select over several)",
    "prometheus": "card: /metrics registry and text encoding (no default features)",
    "jsonschema": "card: addon-operator's OpenAPI validation of values",
    "signal-hook": "card: SIGTERM/SIGINT/SIGCHLD to the signal thread",
    "chrono": "card (via cron): cron's API speaks chrono; our schedule adapter too",
    "base64": "card (via ureq): kubeconfig *-data fields, webhook CA bundles",
    "libc": "process groups, kill(2), wait4(2) rusage, the PID-1 reaper's waitid(2)",
    "libyaml-rs": "helm's YAML 1.1 reading in the post-renderer (scalar styles and tags)",
    "vendor-k8s-types": "ours: the few Kubernetes types read field by field",
    "shell-operator": "the binary",
}


def sizes(binary, crates):
    """Crate (underscore form) -> bytes of text symbols; plus the text total."""
    out = subprocess.run(["nm", "-S", "--size-sort", "--demangle=rust", binary],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    known = set(crates) | {"std", "core", "alloc", "compiler_builtins", "panic_abort"}
    by_crate, total = collections.Counter(), 0
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in "tTwW":
            continue
        size, name = int(parts[1], 16), parts[3]
        total += size
        owner = next((m for m in IDENT.findall(name) if m in known), None)
        if owner is None:
            if name.startswith("ring_core_") or "ring_core_0_17" in name:
                owner = "ring"
            elif "::" in name or name.startswith("_ZN") or name.startswith("_R"):
                owner = "[rust, unattributed]"
            else:
                owner = "[C: musl libc, ring's C helpers]"
        by_crate[owner] += size
    return by_crate, total


def main(binary, target="x86_64-unknown-linux-musl"):
    meta = cargo_graph.metadata(target)
    linked = cargo_graph.linked(meta)
    ids = {p["id"] for p in linked}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    by_id = {p["id"]: p for p in linked}

    def normal_deps(pid):
        return [d["pkg"] for d in nodes[pid]["deps"]
                if d["pkg"] in ids and any(k["kind"] is None for k in d["dep_kinds"])]

    def reach(pid):
        seen, todo = set(), list(normal_deps(pid))
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(normal_deps(d))
        return seen

    parents = collections.defaultdict(list)
    for pid in ids:
        for d in normal_deps(pid):
            parents[d].append(by_id[pid]["name"])
    root = next(p["id"] for p in linked if p["name"] == cargo_graph.ROOT_PACKAGE)
    direct = set(normal_deps(root)) | {root}
    names = {p["name"].replace("-", "_") for p in linked}
    by_crate, total = sizes(binary, names)
    print(f"Machine code (text symbols): {total} bytes.\n")
    print("| crate | version | why (direct) / brought in by | pulls in | share of code |")
    print("| --- | --- | --- | --: | --: |")
    order = list(WHY)
    rows = sorted(linked, key=lambda p: (
        order.index(p["name"]) if p["id"] in direct else len(order),
        -by_crate[p["name"].replace("-", "_")]))
    for p in rows:
        share = by_crate[p["name"].replace("-", "_")]
        via = "via " + ", ".join(sorted(set(parents[p["id"]])))
        by = WHY[p["name"]] if p["id"] in direct else via
        name = f"**{p['name']}**" if p["id"] in direct else p["name"]
        print(f"| {name} | {p['version']} | {by} | {len(reach(p['id']))} | "
              f"{share / total:.1%} ({share // 1024} KiB) |")
    for extra in ["std", "core", "alloc", "compiler_builtins",
                  "[C: musl libc, ring's C helpers]", "[rust, unattributed]"]:
        share = by_crate[extra]
        print(f"| {extra} | toolchain | | | {share / total:.1%} ({share // 1024} KiB) |")


if __name__ == "__main__":
    main(*sys.argv[1:])
