#!/usr/bin/env bash
# Builds the fully static musl binary for one architecture, reproducibly:
#   scripts/static.sh amd64|arm64        (x86_64 / aarch64-unknown-linux-musl)
# and prints the binary's path on its last line.
#
# Reproducible means: the same commit built from any directory, by any user, gives
# the same bytes. So every absolute path that could reach the binary is remapped
# (the checkout to /src, CARGO_HOME to /cargo, the toolchain to /rustc) for rustc
# and for the C compiler (ring's C and assembly), and SOURCE_DATE_EPOCH is the
# commit's time. The release profile strips symbols and debug info.
#
# amd64 compiles ring's C with Debian's musl-gcc (musl-tools) and links with it, as
# `cargo build --target x86_64-unknown-linux-musl` always did. arm64 is a cross
# build: zig (PyPI package ziglang, installed into .tools by this script) compiles
# ring's C and assembly for aarch64-linux-musl, and rust-lld (shipped with rustc)
# links against Rust's own self-contained musl. No Debian cross gcc is needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${1:-amd64}"
# The cargo on PATH (the rustup proxy), whoever calls: a test gets CARGO set to the
# toolchain's own binary, and one cargo for every caller keeps builds fresh.
cargo=cargo
zig_version=0.14.1

case "$arch" in
    amd64 | x86_64) target=x86_64-unknown-linux-musl ;;
    arm64 | aarch64) target=aarch64-unknown-linux-musl ;;
    *) echo "error: unknown ARCH $arch (amd64 or arm64)" >&2; exit 2 ;;
esac

rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2

cargo_home="${CARGO_HOME:-$HOME/.cargo}"
sysroot="$(rustc --print sysroot)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"

# The build sees only this environment (plus what is set below): variables that
# cargo gives a running test or build script (CARGO_PKG_*, CARGO_MANIFEST_DIR,
# OUT_DIR, ...) are tracked by ring's build script, so leaking them in would both
# rebuild ring and make the build depend on who called it. SOURCE_DATE_EPOCH is
# left out too: the binary holds no time, and cc-rs would rebuild ring on each
# commit if it changed. (The image layers and the SBOM do use it.)
keep=(PATH HOME USER TERM CARGO_HOME RUSTUP_HOME RUSTUP_TOOLCHAIN CARGO_NET_OFFLINE
    SHELL_OPERATOR_COMMIT http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY)
clean_env=()
# CARGO_PROFILE_* (e.g. CARGO_PROFILE_RELEASE_STRIP=false for a size study) pass.
for v in "${keep[@]}" $(compgen -e | grep '^CARGO_PROFILE_' || true); do
    [ -z "${!v+x}" ] || clean_env+=("$v=${!v}")
done
clean_env+=("CARGO_TARGET_DIR=$target_dir")

# rustc: paths in panic locations and any file!() come out as /src, /cargo, /rustc.
remap="--remap-path-prefix=$root=/src --remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$sysroot=/rustc"
remap="$remap --remap-path-prefix=$target_dir=/target"
# C: the same for __FILE__ and any debug info the C compiler could emit.
cmap="-ffile-prefix-map=$root=/src -ffile-prefix-map=$cargo_home=/cargo -ffile-prefix-map=$target_dir=/target"

triple_env="$(echo "$target" | tr 'a-z-' 'A-Z_')"
triple_cc="$(echo "$target" | tr '-' '_')"
clean_env+=("CARGO_TARGET_${triple_env}_RUSTFLAGS=$remap" "CFLAGS_${triple_cc}=$cmap")

if [ "$target" = aarch64-unknown-linux-musl ]; then
    zig_dir="$root/.tools/ziglang-$zig_version"
    if [ ! -x "$zig_dir/ziglang/zig" ]; then
        echo "installing zig $zig_version (PyPI ziglang) into $zig_dir" >&2
        python3 -m pip install --quiet --disable-pip-version-check --target "$zig_dir" "ziglang==$zig_version" >&2
    fi
    # zig's cache in the target dir, so builds in two checkouts do not share it.
    clean_env+=("SHIPPING_ZIG=$zig_dir/ziglang/zig"
        "ZIG_GLOBAL_CACHE_DIR=$target_dir/zig-cache" "ZIG_LOCAL_CACHE_DIR=$target_dir/zig-cache"
        "CC_${triple_cc}=$root/scripts/zig-cc" "AR_${triple_cc}=$root/scripts/zig-ar"
        "CARGO_TARGET_${triple_env}_LINKER=rust-lld")
fi

(cd "$root" && env -i "${clean_env[@]}" "$cargo" build --locked --release --target "$target" -p shell-operator) >&2
echo "$target_dir/$target/release/shell-operator"
