# Sourced by scripts/install-control-plane.sh and scripts/install-node.sh: the Go
# link flags that stamp a Kubernetes build with its version, and the build itself. Built from the module
# (not from a git checkout) the binaries otherwise report v0.0.0-master+$Format:%H$,
# which `kubectl version` cannot parse and a kubelet registers its node with.
#
# K8S_STAMP_REV is part of the cache keys: raise it when these flags change, so
# binaries linked with the old flags are not reused.
K8S_STAMP_REV=1

# k8s_ldflags VERSION: prints "-s -w -X ..." for k8s.io/kubernetes VERSION (v1.35.4).
k8s_ldflags() {
    local version="$1" minor pkg flags="-s -w"
    minor="${version#v1.}"
    minor="${minor%%.*}"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    printf '%s' "$flags"
}

# go_build PKG OUT LDFLAGS: builds PKG into "$dest/OUT" (the caller's $dest) with the
# module's committed go.sum (-mod=readonly: a module the proxy refuses fails here, by
# name), written under a temporary name first so a cut build is never taken as done.
go_build() {
    local pkg="$1" out="$2" ldflags="$3"
    echo "building $out from $pkg ..." >&2
    local start=$SECONDS
    if ! go build -mod=readonly -buildvcs=false -trimpath -ldflags="$ldflags" -o "$dest/$out.tmp" "$pkg" >&2; then
        echo "error: go build $pkg failed (see above: a module the proxy refused is named there)" >&2
        exit 1
    fi
    mv "$dest/$out.tmp" "$dest/$out"
    echo "built $out in $((SECONDS - start)) s" >&2
}
