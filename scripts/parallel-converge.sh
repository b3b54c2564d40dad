#!/bin/sh
# Cold converge of addon-operator with N modules (each a chart of a ConfigMap, a
# Service and a Deployment, and one beforeHelm hook) against a fresh kube-sim, with
# the modules all in one order and each in its own order: the wall time from the
# operator's start to /ready (200 after the first converge), and the sum of
# module_run_seconds over it. Rounds alternate the two layouts; medians at the end.
#
# Usage: scripts/parallel-converge.sh [N=20] [ROUNDS=3] [PARALLELISM=0]
# Needs: cargo build --release -p kube-sim --bin kube-sim -p shell-operator --bin shell-operator
# HELM (default .tools/bin/helm); OPERATOR and KUBE_SIM override the binaries.
set -eu
N=${1:-20}
ROUNDS=${2:-3}
PAR=${3:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OPERATOR=${OPERATOR:-$ROOT/target/release/shell-operator}
KUBE_SIM=${KUBE_SIM:-$ROOT/target/release/kube-sim}
HELM=${HELM:-$ROOT/.tools/bin/helm}
WORK=$(mktemp -d)
trap 'kill $SIM $OP 2>/dev/null || true; rm -rf "$WORK"' EXIT INT TERM
SIM=""
OP=""

chart() { # dir name
	mkdir -p "$1/templates" "$1/hooks"
	printf 'apiVersion: v2\nname: %s\nversion: 0.0.1\n' "$2" >"$1/Chart.yaml"
	cat >"$1/templates/all.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: $2
data:
  message: {{ .Values.$2.message | quote }}
---
apiVersion: v1
kind: Service
metadata:
  name: $2
spec:
  selector: {app: $2}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $2
spec:
  replicas: 1
  selector: {matchLabels: {app: $2}}
  template:
    metadata: {labels: {app: $2}}
    spec:
      containers: [{name: app, image: "registry.example/app:1"}]
EOF
	printf '#!/bin/sh\nif [ "$1" = --config ]; then echo %s; exit 0; fi\nexit 0\n' \
		"'{\"configVersion\":\"v1\",\"beforeHelm\":1}'" >"$1/hooks/before-helm"
	chmod +x "$1/hooks/before-helm"
}

layout() { # dir one|own
	rm -rf "$1"
	mkdir -p "$1/modules" "$1/global-hooks" "$1/seed" "$1/home" "$1/tmp"
	printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addons\n' >"$1/seed/ns.yaml"
	: >"$1/modules/values.yaml"
	i=1
	while [ "$i" -le "$N" ]; do
		name=$(printf 'm%03d' "$i")
		if [ "$2" = one ]; then order=001; else order=$(printf '%03d' "$i"); fi
		chart "$1/modules/$order-$name" "$name"
		printf '%sEnabled: true\n%s:\n  message: hello-%s\n' "$name" "$name" "$i" >>"$1/modules/values.yaml"
		i=$((i + 1))
	done
}

now() { date +%s%N; }

run() { # one|own -> prints "seconds sum_module_run_seconds"
	dir=$WORK/$1
	layout "$dir" "$1"
	"$KUBE_SIM" --port 0 --seed "$dir/seed" --auto-ready --kubeconfig-out "$dir/kubeconfig" >"$dir/sim.log" 2>&1 &
	SIM=$!
	while [ ! -s "$dir/kubeconfig" ]; do sleep 0.02; done
	start=$(now)
	(cd "$dir" && exec env HELM_BIN_PATH="$HELM" KUBECONFIG="$dir/kubeconfig" HOME="$dir/home" \
		LOG_TYPE=json ADDON_OPERATOR_MODULE_RUN_PARALLELISM="$PAR" "$OPERATOR" addon-operator start \
		--namespace addons --modules-dir modules --global-hooks-dir global-hooks \
		--tmp-dir "$dir/tmp" --debug-unix-socket "$dir/debug.socket" \
		--prometheus-listen-address 127.0.0.1 --prometheus-listen-port 0 >"$dir/op.log" 2>&1) &
	OP=$!
	port=""
	while [ -z "$port" ]; do
		sleep 0.02
		port=$(grep -o '"address":"127.0.0.1:[0-9]*"' "$dir/op.log" 2>/dev/null | head -1 | sed 's/.*://; s/"//') || true
	done
	until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ready")" = 200 ]; do
		sleep 0.02
	done
	end=$(now)
	sum=$(curl -s "http://127.0.0.1:$port/metrics" |
		awk '/^addon_operator_module_run_seconds_sum/ {s += $2} END {printf "%.2f", s}')
	kill "$OP" "$SIM" 2>/dev/null || true
	wait "$OP" "$SIM" 2>/dev/null || true
	OP=""
	SIM=""
	echo "$(((end - start) / 1000000)) $sum" | awk '{printf "%.2f %s\n", $1 / 1000, $2}'
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "load average before: $(cut -d" " -f1-3 /proc/loadavg)"
: >"$WORK/res-one" && : >"$WORK/res-own"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for l in own one; do
		out=$(run "$l")
		echo "round $r, $l order(s): wall ${out% *} s, sum of module_run_seconds ${out#* } s"
		echo "$out" >>"$WORK/res-$l"
	done
	r=$((r + 1))
done
own=$(cut -d' ' -f1 "$WORK/res-own" | median)
one=$(cut -d' ' -f1 "$WORK/res-one" | median)
echo "N=$N parallelism=$PAR (0: CPUs, at least 2; nproc=$(nproc)): median cold converge, each in its own order ${own} s, all in one order ${one} s, ratio $(echo "$one $own" | awk '{printf "%.2f", $1 / $2}')"
echo "load average after: $(cut -d" " -f1-3 /proc/loadavg)"
