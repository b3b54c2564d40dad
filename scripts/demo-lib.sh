# Sourced by the demo scripts (scripts/demo.sh, scripts/demo-addon.sh): a temp dir,
# cleanup of both processes on exit, building both binaries, and starting kube-sim.
# After `start_kube_sim [kube-sim flags]`: $sim_pid, $url, and $tmp/kubeconfig.

tmp="$(mktemp -d)"
sim_pid="" op_pid=""

stop() {
    if [ -n "$1" ] && kill "$1" 2>/dev/null; then
        wait "$1" 2>/dev/null || true
    fi
}
cleanup() {
    local rc=$?
    stop "$op_pid"
    stop "$sim_pid"
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap "exit 130" INT TERM HUP

build_binaries() {
    echo "== building"
    cargo build -q -p kube-sim --bin kube-sim
    cargo build -q --bin shell-operator
}

start_kube_sim() {
    echo "== starting kube-sim"
    : >"$tmp/kube-sim.out"
    target/debug/kube-sim --port 0 "$@" --kubeconfig-out "$tmp/kubeconfig" >"$tmp/kube-sim.out" 2>&1 &
    sim_pid=$!
    url=""
    for _ in $(seq 100); do
        url="$(sed -n 's/^listening on //p' "$tmp/kube-sim.out" || true)"
        [ -n "$url" ] && break
        kill -0 "$sim_pid" 2>/dev/null || { cat "$tmp/kube-sim.out"; exit 1; }
        sleep 0.1
    done
    [ -n "$url" ] || { echo "kube-sim did not start"; exit 1; }
    echo "kube-sim at $url"
}
