#!/usr/bin/env bash
# Writes the multi-arch scratch image as an OCI image layout, without Docker or a
# registry:
#   scripts/oci-image.sh OUT_DIR ARCH...        (ARCH: amd64, arm64)
# from the static binaries `make static ARCH=...` built. OUT_DIR gets the layout
# (oci-layout, index.json, blobs/sha256/) and OUT_DIR.tar the same as one file for
# `docker load`, `skopeo copy oci-archive:...` or `podman load`.
#
# Each image is what Dockerfile.scratch describes (tests/shipping checks the two
# agree): one layer holding /shell-operator (0755, root-owned), the same ENV,
# USER, EXPOSE, ENTRYPOINT and CMD, and the config's architecture matching the
# binary's ELF machine (tests/shipping reads both). index.json points at one image
# index (tagged with the crate version) listing one manifest per platform.
#
# Deterministic: tar entries carry SOURCE_DATE_EPOCH (the commit's time by default)
# as mtime, uid/gid 0 and no user names; the JSON is written in a fixed form; so
# the same binaries always give the same digests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: oci-image.sh OUT_DIR ARCH...}"
shift
[ "$#" -gt 0 ] || set -- amd64 arm64
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"

rm -rf "$out" "$out.tar"
mkdir -p "$out/blobs/sha256"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# blob FILE: stores FILE under its digest; prints "sha256:<hex> <size>".
blob() {
    local sum size
    sum="$(sha256sum "$1" | cut -d' ' -f1)"
    size="$(stat -c %s "$1")"
    cp "$1" "$out/blobs/sha256/$sum"
    echo "sha256:$sum $size"
}

# A deterministic tar of the given paths under directory $1.
det_tar() {
    local dir="$1" dest="$2"
    shift 2
    tar --format=ustar --sort=name --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX \
        --mtime="@$SOURCE_DATE_EPOCH" -C "$dir" -cf "$dest" "$@"
}

entries=""
for arch in "$@"; do
    case "$arch" in
        amd64) triple=x86_64-unknown-linux-musl; variant="" ;;
        arm64) triple=aarch64-unknown-linux-musl; variant=',"variant":"v8"' ;;
        *) echo "error: unknown ARCH $arch (amd64 or arm64)" >&2; exit 2 ;;
    esac
    bin="$target_dir/$triple/release/shell-operator"
    [ -f "$bin" ] || { echo "error: $bin missing; run make static ARCH=$arch" >&2; exit 1; }
    mkdir -p "$work/$arch/rootfs"
    install -m 0755 "$bin" "$work/$arch/rootfs/shell-operator"
    det_tar "$work/$arch/rootfs" "$work/$arch/layer.tar" shell-operator
    read -r layer layer_size < <(blob "$work/$arch/layer.tar")

    printf '%s' '{"architecture":"'"$arch"'","os":"linux"'"$variant"',"created":"'"$created"'",' \
        '"config":{"User":"65534:65534","ExposedPorts":{"9115/tcp":{}},' \
        '"Env":["SHELL_OPERATOR_HOOKS_DIR=/hooks","SHELL_OPERATOR_TMP_DIR=/tmp/shell-operator","LOG_TYPE=json"],' \
        '"Entrypoint":["/shell-operator"],"Cmd":["start"]},' \
        '"rootfs":{"type":"layers","diff_ids":["'"$layer"'"]},' \
        '"history":[{"created":"'"$created"'","created_by":"scripts/oci-image.sh: COPY shell-operator /shell-operator"}]}' \
        >"$work/$arch/config.json"
    read -r config config_size < <(blob "$work/$arch/config.json")

    printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",' \
        '"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"'"$config"'","size":'"$config_size"'},' \
        '"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"'"$layer"'","size":'"$layer_size"'}]}' \
        >"$work/$arch/manifest.json"
    read -r manifest manifest_size < <(blob "$work/$arch/manifest.json")

    entries="$entries${entries:+,}"'{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"'"$manifest"'","size":'"$manifest_size"',"platform":{"architecture":"'"$arch"'","os":"linux"'"$variant"'}}'
done

printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":['"$entries"']}' \
    >"$work/image-index.json"
read -r index index_size < <(blob "$work/image-index.json")

printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf '%s\n' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"'"$index"'","size":'"$index_size"',"annotations":{"io.containerd.image.name":"shell-operator:'"$version"'","org.opencontainers.image.ref.name":"'"$version"'"}}]}' \
    >"$out/index.json"
det_tar "$out" "$out.tar" oci-layout index.json blobs
echo "$out ($index)"
