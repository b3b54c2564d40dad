#!/usr/bin/env python3
"""Writes the CycloneDX 1.5 JSON bill of materials of one static binary.

    scripts/sbom.py TARGET BINARY OUT

Lists every crate linked into the binary for TARGET (see cargo_graph.py): name,
version, package URL, SPDX licence expression and, for crates from crates.io,
the SHA-256 of the .crate file as Cargo.lock records it. The binary itself is
the metadata component, with its own SHA-256, so the document names the exact
bytes it describes. No clock and no random serial number: the timestamp is
SOURCE_DATE_EPOCH, so the same build gives the same document.
"""

import datetime
import hashlib
import json
import os
import subprocess
import sys

import cargo_graph


def component(package, sums):
    """One CycloneDX component for a cargo package."""
    name, version = package["name"], package["version"]
    purl = f"pkg:cargo/{name}@{version}"
    c = {"type": "library", "bom-ref": purl, "name": name, "version": version,
         "purl": purl}
    licence = cargo_graph.spdx(package.get("license"))
    if licence:
        c["licenses"] = [{"expression": licence}]
    if package["source"] == cargo_graph.CRATES_IO:
        c["hashes"] = [{"alg": "SHA-256", "content": sums[(name, version)]}]
        c["externalReferences"] = [{
            "type": "distribution",
            "url": f"https://crates.io/api/v1/crates/{name}/{version}/download"}]
    else:
        # A path crate of this repository (vendor-k8s-types): built from the same commit.
        c["properties"] = [{"name": "cargo:source", "value": "workspace path"}]
    return c


def rustc_version():
    """`rustc -V` of the compiler on PATH (the one that built the binary)."""
    out = subprocess.run([os.environ.get("RUSTC", "rustc"), "-V"], check=True,
                         stdout=subprocess.PIPE, text=True)
    return out.stdout.strip()


def main(target, binary, out):
    meta = cargo_graph.metadata(target)
    sums = cargo_graph.lock_checksums()
    crates = cargo_graph.linked(meta)
    root = next(p for p in crates if p["name"] == cargo_graph.ROOT_PACKAGE
                and p["source"] is None)
    with open(binary, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    app = component(root, sums)
    app.update(type="application",
               hashes=[{"alg": "SHA-256", "content": digest}],
               properties=[{"name": "rust:target", "value": target},
                           {"name": "rust:rustc", "value": rustc_version()}])
    others = [component(p, sums) for p in crates if p is not root]
    others.sort(key=lambda c: (c["name"], c["version"]))
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {"timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "component": app},
        "components": others,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(bom, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: sbom.py TARGET BINARY OUT")
    main(*sys.argv[1:])
