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
cargo="${CARGO:-cargo}"
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
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"

# rustc: paths in panic locations and any file!() come out as /src, /cargo, /rustc.
remap="--remap-path-prefix=$root=/src --remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$sysroot=/rustc"
remap="$remap --remap-path-prefix=$target_dir=/target"
# C: the same for __FILE__ and any debug info the C compiler could emit.
cmap="-ffile-prefix-map=$root=/src -ffile-prefix-map=$cargo_home=/cargo -ffile-prefix-map=$target_dir=/target"

triple_env="$(echo "$target" | tr 'a-z-' 'A-Z_')"
triple_cc="$(echo "$target" | tr '-' '_')"
export "CARGO_TARGET_${triple_env}_RUSTFLAGS=$remap"
export "CFLAGS_${triple_cc}=$cmap"

if [ "$target" = aarch64-unknown-linux-musl ]; then
    zig_dir="$root/.tools/ziglang-$zig_version"
    if [ ! -x "$zig_dir/ziglang/zig" ]; then
        echo "installing zig $zig_version (PyPI ziglang) into $zig_dir" >&2
        python3 -m pip install --quiet --disable-pip-version-check --target "$zig_dir" "ziglang==$zig_version" >&2
    fi
    export SHIPPING_ZIG="$zig_dir/ziglang/zig"
    # zig's cache outside the checkout, so builds in two checkouts do not share it.
    export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-$target_dir/zig-cache}"
    export ZIG_LOCAL_CACHE_DIR="$ZIG_GLOBAL_CACHE_DIR"
    export "CC_${triple_cc}=$root/scripts/zig-cc"
    export "AR_${triple_cc}=$root/scripts/zig-ar"
    export "CARGO_TARGET_${triple_env}_LINKER=rust-lld"
fi

(cd "$root" && "$cargo" build --locked --release --target "$target" -p shell-operator) >&2
echo "$target_dir/$target/release/shell-operator"
