#!/usr/bin/env bash
# Builds the real control plane the cluster test tier runs against: kube-apiserver
# from the Go module k8s.io/kubernetes and etcd from go.etcd.io/etcd/server/v3, at the
# versions pinned in scripts/control-plane/go.mod (a wrapper module: it requires both
# and replaces the kubernetes staging modules, which k8s.io/kubernetes requires at
# v0.0.0, with their published releases).
#
# The binaries go to .tools/control-plane/k8s-<v>-etcd-<v>-s<r>/ (keyed by version and
# by the revision of kube-apiserver's version stamp, scripts/control-plane/ldflags.sh,
# so a pin or stamp change builds anew and a second run takes a second). The last line on stdout is
# that directory; tests (tests/control-plane) call this script and read it.
#
# Needs Go (1.25 or newer) and the Go module proxy. Nothing of either project is kept
# in this repository; the module cache holds their source.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$repo/scripts/control-plane"
# shellcheck source=control-plane/ldflags.sh
. "$module/ldflags.sh"

version_of() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$module/go.mod"; }
k8s="$(version_of k8s.io/kubernetes)"
etcd="$(version_of go.etcd.io/etcd/server/v3)"
[ -n "$k8s" ] && [ -n "$etcd" ] || { echo "error: versions not found in $module/go.mod" >&2; exit 1; }

dest="${CONTROL_PLANE_TOOLS:-$repo/.tools/control-plane}/k8s-$k8s-etcd-$etcd-s$K8S_STAMP_REV"
if [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ]; then
    echo "$dest"
    exit 0
fi

command -v go >/dev/null 2>&1 || {
    echo "error: Go is needed to build kube-apiserver $k8s and etcd $etcd (the cluster test tier)" >&2
    exit 1
}

mkdir -p "$dest"
cd "$module"
# etcd carries its own version (go.etcd.io/etcd/api/v3/version); kube-apiserver is
# stamped, else it reports v0.0.0-master+$Format:%H$.
[ -x "$dest/etcd" ] || go_build go.etcd.io/etcd/server/v3 etcd "-s -w"
[ -x "$dest/kube-apiserver" ] || go_build k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$(k8s_ldflags "$k8s")"
echo "$dest"
