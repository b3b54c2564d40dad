#!/usr/bin/env bash
# `make demo-addon`: addon-operator on examples/addon against kube-sim with the real
# helm (HELM_BIN_PATH, else helm on PATH, else .tools/bin/helm). Builds both
# binaries unless OPERATOR_BIN and KUBE_SIM_BIN name them, starts kube-sim, runs the operator (as
# `shell-operator addon-operator`) for DEMO_SECONDS (default 16); halfway through it
# edits the ConfigMap (a new message for the echo module, the sysctl module
# disabled), then shows the helm releases and the echo module's ConfigMap, and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${DEMO_SECONDS:-16}"
port="${DEMO_LISTEN_PORT:-9652}"
. scripts/demo-lib.sh
build_binaries
find_helm
start_kube_sim
post() { curl -sf -X POST -H 'Content-Type: application/json' "$url$1" -d "$2" >/dev/null; }
post /api/v1/namespaces '{"metadata":{"name":"addons"}}'

echo "== running addon-operator on examples/addon for ${seconds}s"
HOME="$tmp" HELM_BIN_PATH="$helm" "$operator" addon-operator start \
    --namespace addons \
    --modules-dir examples/addon/modules \
    --global-hooks-dir examples/addon/global-hooks \
    --tmp-dir "$tmp/run" \
    --kube-config "$tmp/kubeconfig" \
    --debug-unix-socket "$tmp/debug.socket" \
    --prometheus-listen-port "$port" >"$tmp/operator.log" 2>&1 &
op_pid=$!

sleep $((seconds / 2))
echo "== ConfigMap: echo gets a new message, sysctl is disabled"
post /api/v1/namespaces/addons/configmaps \
    '{"metadata":{"name":"addon-operator"},"data":{"echo":"message: from the ConfigMap\n","sysctlEnabled":"false"}}'
sleep $((seconds - seconds / 2))

echo "== operator log"
cat "$tmp/operator.log"
echo "== helm releases"
HOME="$tmp" "$helm" --kubeconfig "$tmp/kubeconfig" -n addons list
echo "== ConfigMap/echo rendered by the echo module's chart"
curl -sf "$url/api/v1/namespaces/addons/configmaps/echo" | sed -n 's/.*"data":\({[^}]*}\).*/\1/p'
echo
grep -q '"message":"from the ConfigMap"' <(curl -sf "$url/api/v1/namespaces/addons/configmaps/echo") \
    || { echo "demo failed: the echo module did not pick up the ConfigMap"; exit 1; }
if HOME="$tmp" "$helm" --kubeconfig "$tmp/kubeconfig" -n addons list -q | grep -qx sysctl; then
    echo "demo failed: sysctl is still installed"; exit 1
fi
echo "== demo ok"
