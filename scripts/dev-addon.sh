#!/usr/bin/env bash
# `make dev-addon`: a local loop for module authors, no cluster. Starts kube-sim
# and addon-operator on a modules directory with the helm you have
# (HELM_BIN_PATH, else helm on PATH, else .tools/bin/helm; helm 3 or 4), writes a
# kubeconfig and prints the `export KUBECONFIG=...` line. Ctrl-C stops both.
#
#   DEV_MODULES=dir        modules directory (default: a copy of examples/addon/modules)
#   DEV_GLOBAL_HOOKS=dir   global hooks directory (default: examples/addon/global-hooks
#                          with the default modules, else none)
#   DEV_NAMESPACE          namespace of the ConfigMap and the releases (default addons)
#   DEV_KUBECONFIG         where the kubeconfig goes (default /tmp/addon-operator-dev.kubeconfig)
#   OPERATOR_BIN, KUBE_SIM_BIN   use these binaries instead of building debug ones
set -euo pipefail
cd "$(dirname "$0")/.."

ns="${DEV_NAMESPACE:-addons}"
kubeconfig="${DEV_KUBECONFIG:-/tmp/addon-operator-dev.kubeconfig}"
. scripts/demo-lib.sh

if [ -n "${DEV_MODULES:-}" ]; then
    modules="$(cd "$DEV_MODULES" && pwd)"
    global_hooks="${DEV_GLOBAL_HOOKS:-$tmp/no-global-hooks}"
else
    # A copy: the examples stay as they are; point DEV_MODULES at your own to edit them live.
    mkdir -p "$tmp/modules"
    cp -r examples/addon/modules/. "$tmp/modules/"
    modules="$tmp/modules"
    global_hooks="${DEV_GLOBAL_HOOKS:-examples/addon/global-hooks}"
fi
mkdir -p "$global_hooks"

build_binaries
find_helm
start_kube_sim
post() { curl -sf -X POST -H 'Content-Type: application/json' "$url$1" -d "$2" >/dev/null; }
post /api/v1/namespaces "{\"metadata\":{\"name\":\"$ns\"}}"
cp "$tmp/kubeconfig" "$kubeconfig"

echo "== starting addon-operator on $modules (log: $tmp/operator.log)"
HOME="$tmp" HELM_BIN_PATH="$helm" "$operator" addon-operator start \
    --namespace "$ns" \
    --modules-dir "$modules" \
    --global-hooks-dir "$global_hooks" \
    --tmp-dir "$tmp/run" \
    --kube-config "$tmp/kubeconfig" \
    --debug-unix-socket "$tmp/debug.socket" \
    --prometheus-listen-address 127.0.0.1 \
    --prometheus-listen-port 0 --log-type json >"$tmp/operator.log" 2>&1 &
op_pid=$!

# Ready when the first converge is done (or the operator stopped: show why).
ready=""
for _ in $(seq 600); do
    grep -q '"msg":"first converge done"' "$tmp/operator.log" && { ready=1; break; }
    kill -0 "$op_pid" 2>/dev/null || { tail -n 30 "$tmp/operator.log"; exit 1; }
    sleep 0.1
done
[ -n "$ready" ] || echo "(the first converge is not done yet; see the log)"

cat <<END
== ready: kube-sim at $url, addon-operator pid $op_pid, helm $helm
export KUBECONFIG=$kubeconfig
Try:
  helm list -n $ns                       # the modules' releases
  kubectl -n $ns create configmap addon-operator --from-literal=<module>='param: 1'   # the config values
  kubectl -n $ns patch configmap addon-operator --type merge -p '{"data":{"<module>Enabled":"false"}}'
  $operator addon-operator module list -o text --debug-unix-socket $tmp/debug.socket
Operator log (JSON): tail -f $tmp/operator.log    Ctrl-C stops kube-sim and the operator.
END
wait "$op_pid"
