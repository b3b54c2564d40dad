# Everyday commands. `make test` is what CI runs (see .ci/run).
CARGO ?= cargo
MUSL_TARGET := x86_64-unknown-linux-musl
STATIC_BIN := target/$(MUSL_TARGET)/release/shell-operator

.PHONY: build test static bench bench-peers run demo demo-addon dev fmt lint clean

build:
	$(CARGO) build --release

# The whole test suite: unit tests, integration tests on the real binary, kube-sim.
test:
	$(CARGO) test --workspace --no-fail-fast

# Fully static musl binary (needs Debian's musl-tools for ring's C code).
static:
	rustup target list --installed | grep -q $(MUSL_TARGET) || rustup target add $(MUSL_TARGET)
	$(CARGO) build --release --target $(MUSL_TARGET)
	@ls -l $(STATIC_BIN)
	@file $(STATIC_BIN) 2>/dev/null || true

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

# Issue 12: ours vs kopf vs a plain watch loop on 10k pods in kube-sim (benches/peers.rs).
# Not part of `make bench`: needs python3 with venv and network for `pip install kopf`.
PEERS_VENV := .tools/peers-venv
bench-peers: static
	test -x $(PEERS_VENV)/bin/kopf || (python3 -m venv $(PEERS_VENV) && $(PEERS_VENV)/bin/pip install -q kopf)
	$(CARGO) build --release -p kube-sim
	$(CARGO) bench --bench peers -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim --venv $(PEERS_VENV)

# Runs the operator on the bundled example hooks (Ctrl-C to stop).
run:
	$(CARGO) run --release -- start --hooks-dir examples/hooks --tmp-dir /tmp/shell-operator-examples --listen-port 9115 \
		--debug-unix-socket /tmp/shell-operator-examples/debug.socket

# The secret-copier example against kube-sim (scripts/demo.sh; DEMO_SECONDS=15).
demo:
	scripts/demo.sh

# addon-operator on examples/addon against kube-sim with the real helm (scripts/demo-addon.sh).
demo-addon:
	scripts/demo-addon.sh

# Local loop for hook authors: kube-sim + the operator on examples/ (webhooks
# included), a kubeconfig for kubectl; DEV_HOOKS=dir for your own hooks (scripts/dev.sh).
dev:
	scripts/dev.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
