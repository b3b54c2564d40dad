#!/usr/bin/env bash
# The soak (tests/soak) with the operator's live heap sampled from inside
# (docs/soak.md, "Heap growth (issue 12)"). Builds scripts/heap-live.c into an
# LD_PRELOAD library, runs the soak on the release binary wrapped with it, and
# prints, for every 100 s after the soak's 25 % warm-up, the medians of the live
# bytes and chunks the operator holds and of glibc's "in use" figure
# (malloc_info's, the one seen to grow). HEAP_TCACHE=0 turns glibc's per-thread caches
# off (GLIBC_TUNABLES) for the control run. SOAK_SECONDS and SOAK_SEED as for
# `make soak`; samples go to target/soak-heap/samples-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${SOAK_SECONDS:-600}"
binary="${HEAP_BINARY:-$PWD/target/release/shell-operator}"
dir="$PWD/target/soak-heap"
samples="$dir/samples-$(date +%s).txt"
mkdir -p "$dir"
cc -O2 -Wall -shared -fPIC -o "$dir/heap-live.so" scripts/heap-live.c -lpthread
[ -n "${HEAP_BINARY:-}" ] || cargo build --release --bin shell-operator

tunables=""
[ "${HEAP_TCACHE:-1}" = 0 ] && tunables="GLIBC_TUNABLES=glibc.malloc.tcache_count=0"
cat > "$dir/operator.sh" <<WRAP
#!/bin/sh
$tunables HEAP_LIVE_OUT='$samples' LD_PRELOAD='$dir/heap-live.so' exec '$binary' "\$@"
WRAP
chmod +x "$dir/operator.sh"

SOAK_SECONDS="$seconds" SOAK_OPERATOR="$dir/operator.sh" cargo test --test soak -- --nocapture

awk -v warm=$((seconds / 4)) '
  function median(list, n,    i, j, v, a) {
    split(list, a, " ")
    for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
    return a[int((n + 1) / 2)]
  }
  NF >= 7 && $1 >= warm {
    w = int($1 / 100) * 100
    if (!(w in n)) order[++windows] = w
    n[w]++; live[w] = live[w] " " $2; chunks[w] = chunks[w] " " $3; inuse[w] = inuse[w] " " $4
  }
  END {
    printf "medians by 100 s after the warm-up (%s)\n", FILENAME
    printf "%10s %12s %12s %14s\n", "window", "live bytes", "live chunks", "glibc in use"
    for (k = 1; k <= windows; k++) {
      w = order[k]
      printf "%5d-%-4d %12d %12d %14d\n", w, w + 100, median(live[w], n[w]), median(chunks[w], n[w]), median(inuse[w], n[w])
    }
  }' "$samples"
