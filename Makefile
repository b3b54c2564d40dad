# Everyday commands. `make test` is what CI runs (see .ci/run).
CARGO ?= cargo
MUSL_TARGET := x86_64-unknown-linux-musl
STATIC_BIN := target/$(MUSL_TARGET)/release/shell-operator

.PHONY: build test soak static bench run demo demo-addon fmt lint clean

build:
	$(CARGO) build --release

# The whole test suite: unit tests, integration tests on the real binary, kube-sim.
test:
	$(CARGO) test --workspace --no-fail-fast

# The soak test (tests/soak, docs/soak.md) on the release binary for SOAK_SECONDS
# (default 1 h): ~100 object changes/s, random API faults (SOAK_SEED replays a run),
# ledger, RSS/fd/thread and leftover checks. `make test` runs it for 2 minutes.
SOAK_SECONDS ?= 3600
soak:
	$(CARGO) build --release
	SOAK_RELEASE=1 SOAK_SECONDS=$(SOAK_SECONDS) $(CARGO) test --test soak -- --nocapture

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
	$(CARGO) bench --bench addon -- --operator $(STATIC_BIN) --kube-sim target/release/kube-sim

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

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
