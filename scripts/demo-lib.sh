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

# The binaries: $OPERATOR_BIN and $KUBE_SIM_BIN when set (a release build, say),
# else the debug builds, built (or found up to date) by cargo.
build_binaries() {
    operator="${OPERATOR_BIN:-target/debug/shell-operator}"
    kube_sim="${KUBE_SIM_BIN:-target/debug/kube-sim}"
    if [ -z "${KUBE_SIM_BIN:-}" ] || [ -z "${OPERATOR_BIN:-}" ]; then
        echo "== building"
    fi
    [ -n "${KUBE_SIM_BIN:-}" ] || cargo build -q -p kube-sim --bin kube-sim
    [ -n "${OPERATOR_BIN:-}" ] || cargo build -q --bin shell-operator
    for b in "$operator" "$kube_sim"; do
        [ -x "$b" ] || { echo "not an executable: $b"; exit 1; }
    done
}

# The helm to use: $HELM_BIN_PATH, else `helm` on PATH, else .tools/bin/helm
# (installed on first use). Sets $helm to an absolute path.
find_helm() {
    helm="${HELM_BIN_PATH:-}"
    [ -n "$helm" ] || helm="$(command -v helm || true)"
    if [ -z "$helm" ]; then
        [ -x .tools/bin/helm ] || scripts/install-k8s-clients.sh
        helm="$PWD/.tools/bin/helm"
    fi
    helm="$(command -v "$helm")" || { echo "helm not found: ${HELM_BIN_PATH:-helm}"; exit 1; }
    case "$helm" in /*) ;; *) helm="$PWD/$helm" ;; esac
    echo "== helm: $helm ($("$helm" version --short 2>/dev/null || echo '?'))"
}

start_kube_sim() {
    echo "== starting kube-sim"
    : >"$tmp/kube-sim.out"
    "${kube_sim:-target/debug/kube-sim}" --port 0 "$@" --kubeconfig-out "$tmp/kubeconfig" >"$tmp/kube-sim.out" 2>&1 &
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
