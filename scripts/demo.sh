#!/usr/bin/env bash
# `make demo`: the secret-copier example against kube-sim. Builds both
# binaries, starts kube-sim seeded with examples/secret-copier/seed, runs the
# operator on the example for DEMO_SECONDS (default 15) while adding a
# namespace and changing the source Secret, then lists the Secrets in every
# namespace through kube-sim's API and stops both processes.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${DEMO_SECONDS:-15}"
port="${DEMO_LISTEN_PORT:-9651}"
. scripts/demo-lib.sh
build_binaries
start_kube_sim --seed examples/secret-copier/seed

echo "== running shell-operator on examples/secret-copier for ${seconds}s"
"$operator" start \
    --hooks-dir examples/secret-copier/hooks \
    --tmp-dir "$tmp/run" \
    --kube-config "$tmp/kubeconfig" \
    --debug-unix-socket "$tmp/debug.socket" \
    --listen-port "$port" >"$tmp/operator.log" 2>&1 &
op_pid=$!

# Halfway through: a new namespace (gets a copy) and a changed source (copies follow).
sleep $((seconds / 2))
curl -sf -X POST -H 'Content-Type: application/json' "$url/api/v1/namespaces" \
    -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-c"}}' >/dev/null \
    && echo "created namespace team-c"
curl -sf -X PATCH -H 'Content-Type: application/merge-patch+json' \
    "$url/api/v1/namespaces/default/secrets/registry-credentials" \
    -d '{"data":{"password":"cm90YXRlZA=="}}' >/dev/null \
    && echo "rotated the password of default/registry-credentials"
sleep $((seconds - seconds / 2))

early=0
if ! kill -0 "$op_pid" 2>/dev/null; then
    early=1
    echo "shell-operator exited early:"
fi
echo "== operator log (last lines)"
tail -n 25 "$tmp/operator.log"

echo "== Secrets in kube-sim"
curl -sf "$url/api/v1/secrets" | python3 -c '
import base64, json, sys
for s in json.load(sys.stdin)["items"]:
    m = s["metadata"]
    kind = "copy" if (m.get("labels") or {}).get("copied-by") else "source"
    pw = base64.b64decode(s.get("data", {}).get("password", "")).decode(errors="replace")
    print("%-16s %-22s %-7s password=%s" % (m["namespace"], m["name"], kind, pw or "-"))
'
[ "$early" = 0 ] || { echo "demo failed: shell-operator exited early"; exit 1; }
copies="$(curl -sf "$url/api/v1/secrets?labelSelector=copied-by%3Dsecret-copier" |
    python3 -c 'import json, sys; print(len(json.load(sys.stdin)["items"]))')"
# Expected: registry-credentials in team-a, team-b and team-c; retired-token gone.
[ "$copies" = 3 ] || { echo "demo failed: $copies copies instead of 3"; exit 1; }
echo "demo ok: 3 copies, the stale copy deleted"
