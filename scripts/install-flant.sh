#!/usr/bin/env bash
# Builds flant's own operators from their released Go modules, as the oracle the
# compatibility suite (tests/compat, `make test-compat`) runs beside ours. Each is
# built from a wrapper module under scripts/flant/<name>/ that requires the release
# and repeats its replace directives (those only apply in the main module).
#
# Binaries go to .tools/flant/<name>-<version>/<name> (keyed by version; a second run
# takes a second). The last line on stdout is the binary's path.
#
# `scripts/install-flant.sh` builds the shell-operator (v1.20.2);
# `scripts/install-flant.sh addon-operator` builds flant's addon-operator v1.5.0, the
# newest release the Go module proxy serves whole (scripts/flant/addon-operator/go.mod
# says what it refuses of the newer ones).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${FLANT_TOOLS:-$repo/.tools/flant}"

command -v go >/dev/null 2>&1 || { echo "error: Go is needed to build flant's operators" >&2; exit 1; }

# build NAME PACKAGE: builds PACKAGE in scripts/flant/NAME; prints the binary's path.
build() {
    local name="$1" pkg="$2" module="$repo/scripts/flant/$1"
    local version
    version="$(awk -v m="github.com/flant/$name" '$1 == "require" && $2 == m { print $3; exit }' "$module/go.mod")"
    [ -n "$version" ] || { echo "error: no version of github.com/flant/$name in $module/go.mod" >&2; exit 1; }
    local dest="$tools/$name-$version"
    if [ ! -x "$dest/$name" ]; then
        mkdir -p "$dest"
        echo "building flant's $name $version ..." >&2
        local start=$SECONDS
        (cd "$module" && go build -mod=readonly -buildvcs=false -trimpath -ldflags='-s -w' \
            -o "$dest/$name.tmp" "$pkg") >&2 || {
            echo "error: go build $pkg failed (a module the proxy refused is named above)" >&2
            exit 1
        }
        mv "$dest/$name.tmp" "$dest/$name"
        echo "built $name in $((SECONDS - start)) s" >&2
    fi
    echo "$dest/$name"
}

case "${1:-shell-operator}" in
shell-operator) build shell-operator github.com/flant/shell-operator/cmd/shell-operator ;;
addon-operator) build addon-operator github.com/flant/addon-operator/cmd/addon-operator ;;
*) echo "usage: $0 [shell-operator|addon-operator]" >&2; exit 2 ;;
esac
