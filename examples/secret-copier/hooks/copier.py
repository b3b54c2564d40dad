#!/usr/bin/env python3
"""secret-copier: keeps a copy of every Secret labelled secret-copier=yes in the
`default` namespace in every other namespace (except the `kube-*` ones), through $KUBERNETES_PATCH_PATH
(CreateOrUpdate and Delete operations; no kubectl).

The three kubernetes bindings share the group `copier`, so every run sees all
three snapshots and reconciles the whole picture: the sources, the namespaces,
and the copies that exist now. Runs caused by its own writes find nothing to do.
"""
import json
import os
import sys

SOURCE_NS = "default"
SOURCE_LABEL = "secret-copier"
COPY_LABEL = "copied-by"  # copied-by=secret-copier marks our copies

CONFIG = {
    "configVersion": "v1",
    "kubernetes": [
        {
            "name": "sources",
            "group": "copier",
            "apiVersion": "v1",
            "kind": "Secret",
            "labelSelector": {"matchLabels": {SOURCE_LABEL: "yes"}},
            "namespace": {"nameSelector": {"matchNames": [SOURCE_NS]}},
        },
        {
            "name": "namespaces",
            "group": "copier",
            "apiVersion": "v1",
            "kind": "Namespace",
            "executeHookOnEvent": ["Added"],
        },
        {
            "name": "copies",
            "group": "copier",
            "apiVersion": "v1",
            "kind": "Secret",
            "labelSelector": {"matchLabels": {COPY_LABEL: "secret-copier"}},
            # A copy edited or deleted by someone else is restored.
            "executeHookOnEvent": ["Modified", "Deleted"],
        },
    ],
}


def objects(snapshots, binding):
    """The full objects of one binding's snapshot."""
    return [i["object"] for i in snapshots.get(binding, []) if i.get("object")]


def latest_snapshots(contexts):
    """The snapshots of the last context that carries them (Group contexts do)."""
    for ctx in reversed(contexts):
        if ctx.get("snapshots"):
            return ctx["snapshots"]
    return {}


def copy_of(secret, namespace):
    """The copy of a source Secret for `namespace`: data, type and labels only."""
    meta = secret["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != SOURCE_LABEL}
    labels[COPY_LABEL] = "secret-copier"
    copy = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": meta["name"], "namespace": namespace, "labels": labels},
        "type": secret.get("type", "Opaque"),
    }
    if secret.get("data"):
        copy["data"] = secret["data"]
    return copy


def same(copy, existing):
    """Whether an existing copy already matches (so nothing is written)."""
    if existing is None:
        return False
    return (
        existing.get("data") == copy.get("data")
        and existing.get("type", "Opaque") == copy["type"]
        and (existing["metadata"].get("labels") or {}) == copy["metadata"]["labels"]
    )


def plan(snapshots):
    """Patch operations turning the copies that exist into the ones wanted."""
    sources = objects(snapshots, "sources")
    targets = [
        n["metadata"]["name"]
        for n in objects(snapshots, "namespaces")
        if n["metadata"]["name"] != SOURCE_NS
        and not n["metadata"]["name"].startswith("kube-")
        and (n.get("status") or {}).get("phase") != "Terminating"
    ]
    existing = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): s
        for s in objects(snapshots, "copies")
    }
    ops, wanted = [], set()
    for secret in sources:
        for ns in targets:
            copy = copy_of(secret, ns)
            key = (ns, secret["metadata"]["name"])
            wanted.add(key)
            if not same(copy, existing.get(key)):
                ops.append({"operation": "CreateOrUpdate", "object": copy})
    for (ns, name) in sorted(set(existing) - wanted):
        if ns == SOURCE_NS:
            continue
        ops.append(
            {"operation": "Delete", "apiVersion": "v1", "kind": "Secret", "namespace": ns, "name": name}
        )
    return ops


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--config":
        print(json.dumps(CONFIG))
        return
    with open(os.environ["BINDING_CONTEXT_PATH"]) as f:
        contexts = json.load(f)
    ops = plan(latest_snapshots(contexts))
    with open(os.environ["KUBERNETES_PATCH_PATH"], "a") as f:
        for op in ops:
            f.write(json.dumps(op) + "\n")
    for op in ops:
        target = op.get("object", {}).get("metadata", op)
        print(f"secret-copier: {op['operation']} {target.get('namespace')}/{target.get('name')}")
    if not ops:
        print("secret-copier: copies are up to date")


if __name__ == "__main__":
    main()
