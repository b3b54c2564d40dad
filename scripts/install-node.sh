#!/usr/bin/env bash
# Builds and gathers what the node test tier (tests/node, `make node`) runs beside the
# control plane of scripts/install-control-plane.sh:
#   - kubelet, kube-controller-manager, kube-scheduler and kube-proxy from the Go module
#     k8s.io/kubernetes at the version pinned in scripts/control-plane/go.mod (the same
#     wrapper module as kube-apiserver), version-stamped at link time;
#   - the CNI plugins bridge, host-local, loopback and portmap from
#     github.com/containernetworking/plugins at $CNI_VERSION (Go module proxy);
#   - Debian's containerd, runc, docker.io (dockerd builds Dockerfile.scratch),
#     busybox-static (the pods' busybox) and iptables, with apt-get where missing.
#
# The Go binaries go to .tools/node/k8s-<v>-cni-<v>-s<stamp>/ (keyed by version and by
# the version stamp's revision, K8S_STAMP_REV in scripts/control-plane/ldflags.sh, so a pin or a stamp change builds anew and a second run takes a
# second). The last line on stdout is that directory; tests/node-support reads it.
set -euo pipefail

CNI_VERSION=v1.10.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$repo/scripts/control-plane"
# shellcheck source=control-plane/ldflags.sh
. "$module/ldflags.sh"

k8s="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$module/go.mod")"
[ -n "$k8s" ] || { echo "error: k8s.io/kubernetes not found in $module/go.mod" >&2; exit 1; }

# Debian packages, installed only when their command is missing.
need_pkgs=()
command -v containerd >/dev/null || need_pkgs+=(containerd)
command -v runc >/dev/null || need_pkgs+=(runc)
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || need_pkgs+=(busybox-static)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v openssl >/dev/null || need_pkgs+=(openssl)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    echo "installing Debian packages: ${need_pkgs[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || { echo "error: apt-get update failed" >&2; exit 1; }
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >&2 ||
        { echo "error: apt-get install ${need_pkgs[*]} failed" >&2; exit 1; }
fi

dest="${NODE_TOOLS:-$repo/.tools/node}/k8s-$k8s-cni-$CNI_VERSION-s$K8S_STAMP_REV"
bins=(kubelet kube-controller-manager kube-scheduler kube-proxy)
cni=(bridge host-local loopback portmap)
complete() {
    local b
    for b in "${bins[@]}"; do [ -x "$dest/$b" ] || return 1; done
    for b in "${cni[@]}"; do [ -x "$dest/cni/$b" ] || return 1; done
}
if complete; then
    echo "$dest"
    exit 0
fi

command -v go >/dev/null 2>&1 || {
    echo "error: Go is needed to build the node's components ($k8s, CNI plugins $CNI_VERSION)" >&2
    exit 1
}

ldflags="$(k8s_ldflags "$k8s")"

mkdir -p "$dest/cni"
cd "$module"
for b in "${bins[@]}"; do
    [ -x "$dest/$b" ] || go_build "k8s.io/kubernetes/cmd/$b" "$b" "$ldflags"
done

# The CNI plugins are built from their own module (go install pkg@version uses its
# go.mod and go.sum), outside this wrapper module.
start=$SECONDS
pkgs=()
for p in "${cni[@]}"; do
    case "$p" in
    host-local) pkgs+=("github.com/containernetworking/plugins/plugins/ipam/host-local@$CNI_VERSION") ;;
    portmap) pkgs+=("github.com/containernetworking/plugins/plugins/meta/portmap@$CNI_VERSION") ;;
    *) pkgs+=("github.com/containernetworking/plugins/plugins/main/$p@$CNI_VERSION") ;;
    esac
done
echo "building CNI plugins ${cni[*]} $CNI_VERSION ..." >&2
if ! (cd / && GOBIN="$dest/cni" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "${pkgs[@]}" >&2); then
    echo "error: go install of the CNI plugins $CNI_VERSION failed (see above)" >&2
    exit 1
fi
echo "built CNI plugins in $((SECONDS - start)) s" >&2
complete || { echo "error: $dest is incomplete after the build" >&2; exit 1; }
echo "$dest"
