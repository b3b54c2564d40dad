#!/usr/bin/env bash
# `make dev`: a local loop for hook authors, no cluster. Starts kube-sim and the
# operator on a hooks directory (default: examples/hooks plus the webhook examples
# of examples/webhooks), makes a test CA and a webhook certificate for the
# operator's Services, routes those Services to the operator through Endpoints
# objects (kube-sim calls admission and conversion webhooks as kube-apiserver
# does), writes a kubeconfig and prints the `export KUBECONFIG=...` line.
# Ctrl-C stops both.
#
#   DEV_HOOKS=dir   hooks directory to run instead of the examples
#   DEV_SEED=dir    manifests to seed kube-sim with (default examples/webhooks/seed)
#   DEV_KUBECONFIG  where the kubeconfig goes (default /tmp/shell-operator-dev.kubeconfig)
set -euo pipefail
cd "$(dirname "$0")/.."

ns=shell-operator
kubeconfig="${DEV_KUBECONFIG:-/tmp/shell-operator-dev.kubeconfig}"
seed="${DEV_SEED:-examples/webhooks/seed}"
. scripts/demo-lib.sh

hooks_dir() {
    if [ -n "${DEV_HOOKS:-}" ]; then
        echo "$DEV_HOOKS"
        return
    fi
    # A copy: the examples stay as they are; point DEV_HOOKS at your own hooks to edit them live.
    mkdir -p "$tmp/hooks"
    cp -r examples/hooks/. "$tmp/hooks/"
    cp -r examples/webhooks/hooks "$tmp/hooks/webhooks"
    echo "$tmp/hooks"
}

make_certs() {
    local svc_names="DNS:shell-operator-validating-svc.$ns.svc,DNS:shell-operator-conversion-svc.$ns.svc"
    (
        cd "$tmp"
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
        openssl req -x509 -new -key ca.key -subj /CN=dev-webhook-ca -days 30 \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out ca.crt 2>/dev/null
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out tls.key 2>/dev/null
        openssl req -new -key tls.key -subj /CN=shell-operator -out tls.csr 2>/dev/null
        printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=%s,IP:127.0.0.1\n' "$svc_names" >tls.ext
        openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile tls.ext -out tls.crt 2>/dev/null
    )
}

# The port the operator logged for a server ("admission" or "conversion").
logged_port() {
    sed -n "s/.*\"msg\":\"$1 webhook server listening\".*\"address\":\"[^\"]*:\([0-9]*\)\".*/\1/p" "$tmp/operator.log" | head -n1
}

post() {
    curl -sf -X POST -H 'Content-Type: application/json' "$url$1" -d "$2" >/dev/null
}

# Service + Endpoints so kube-sim reaches the operator's server at 127.0.0.1:PORT.
route() {
    local name="$1" port="$2"
    post "/api/v1/namespaces/$ns/services" \
        "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"$name\",\"namespace\":\"$ns\"},\"spec\":{\"ports\":[{\"port\":443,\"targetPort\":$port}]}}"
    post "/api/v1/namespaces/$ns/endpoints" \
        "{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":{\"name\":\"$name\",\"namespace\":\"$ns\"},\"subsets\":[{\"addresses\":[{\"ip\":\"127.0.0.1\"}],\"ports\":[{\"port\":$port}]}]}"
}

build_binaries
make_certs
start_kube_sim --seed "$seed"
post /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
hooks="$(hooks_dir)"
echo "== starting shell-operator on $hooks (log: $tmp/operator.log)"
"$operator" start --hooks-dir "$hooks" --tmp-dir "$tmp/run" \
    --kube-config "$tmp/kubeconfig" --namespace "$ns" --listen-port 0 --log-type json \
    --debug-unix-socket "$tmp/debug.socket" \
    --validating-webhook-server-cert "$tmp/tls.crt" --validating-webhook-server-key "$tmp/tls.key" \
    --validating-webhook-ca "$tmp/ca.crt" --validating-webhook-listen-address 127.0.0.1 \
    --validating-webhook-listen-port 0 \
    --conversion-webhook-server-cert "$tmp/tls.crt" --conversion-webhook-server-key "$tmp/tls.key" \
    --conversion-webhook-ca "$tmp/ca.crt" --conversion-webhook-listen-address 127.0.0.1 \
    --conversion-webhook-listen-port 0 >"$tmp/operator.log" 2>&1 &
op_pid=$!

admission="" conversion=""
for _ in $(seq 100); do
    admission="$(logged_port admission)" conversion="$(logged_port conversion)"
    [ -n "$admission" ] && [ -n "$conversion" ] && break
    kill -0 "$op_pid" 2>/dev/null || { tail -n 20 "$tmp/operator.log"; exit 1; }
    sleep 0.1
done
# Without webhook bindings the servers do not start; nothing to route then.
[ -n "$admission" ] && route shell-operator-validating-svc "$admission"
[ -n "$conversion" ] && route shell-operator-conversion-svc "$conversion"
# The operator registers its webhook configurations right after its servers start.
for _ in $(seq 50); do
    [ -z "$admission" ] && break
    curl -sf "$url/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations" | grep -q '"name"' && break
    sleep 0.1
done
cp "$tmp/kubeconfig" "$kubeconfig"

cat <<EOF
== ready: kube-sim at $url, shell-operator pid $op_pid
export KUBECONFIG=$kubeconfig
Try (examples/webhooks):
  kubectl create configmap db --from-literal=password=x     # denied by configmap-policy.sh
  kubectl create configmap settings --from-literal=color=blue && kubectl get cm settings --show-labels
Operator log (JSON): tail -f $tmp/operator.log    Ctrl-C stops kube-sim and the operator.
EOF
wait "$op_pid"
