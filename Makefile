# hami_fast task runner. `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(PY):
	@echo "==> creating $(VENV) (python3 -m venv) and upgrading pip"
	@python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip

.PHONY: install
install: $(PY) ## build the Rust engine and install hami-fast (editable) with test extras into .venv, a line per stage
	@VENV=$(VENV) scripts/install.sh

.PHONY: demo
demo: install ## run hami-fast on the built-in demo cluster and schedule a few hundred pods
	@echo "==> hami-fast demo --pods 300: serving the built-in demo cluster and scheduling 300 pods over HTTP"
	@$(VENV)/bin/hami-fast demo --pods 300

.PHONY: test-rust
test-rust: ## Rust unit tests of hami-core
	cargo test -p hami-core --quiet

.PHONY: test-python
test-python: install ## pytest suite (contract, differential, CLI)
	$(PY) -m pytest tests -q

.PHONY: test
test: install test-rust test-python ## set up from scratch and run every test

.PHONY: lint
lint: install ## format, lint, type and stub checks: cargo fmt, clippy -D warnings, ruff check/format, mypy, _native.pyi vs the module
	cargo fmt --all --check
	cargo clippy --all-targets --quiet -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest tests/infra/test_stubs.py -q -p no:randomly

.PHONY: bench
bench: install ## benchmarks, side by side (pytest-benchmark)
	$(PY) -m pytest bench --benchmark-enable --benchmark-only -q -p no:randomly

.PHONY: wheel
wheel: $(PY) ## build a release wheel into dist/
	$(PY) -m pip install -q 'maturin>=1.16,<2'
	$(VENV)/bin/maturin build --release -o dist

# Console scripts on PATH, the container image
BINDIR ?= $(HOME)/.local/bin

.PHONY: install-user
install-user: ## link hami-fast and kubectl-hami from .venv into $(BINDIR) (default ~/.local/bin), usable from any shell
	@test -x $(VENV)/bin/hami-fast || $(MAKE) install
	@mkdir -p $(BINDIR)
	@for s in hami-fast kubectl-hami; do ln -sf $(abspath $(VENV))/bin/$$s $(BINDIR)/$$s; echo "$(BINDIR)/$$s -> $(abspath $(VENV))/bin/$$s"; done
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "add $(BINDIR) to PATH, e.g. export PATH=\"$(BINDIR):\$$PATH\"";; esac

.PHONY: image
image: wheel ## container image (Debian slim base by mmdebstrap, buildah --isolation chroot) as dist/hami-fast-v<version>.oci.tar
	scripts/install-image-tools.sh
	scripts/build-image.sh

# Side by side with HAMi's binary
# The sizes: 1,000 KWOK nodes x 8 GPUs, 5,000 pods (raised limits) + 20 pods at QPS 5 / burst 10,
# and 40 pods onto 2 nodes with a 1 s Allocate. Needs the control plane, helm, KWOK (built and cached
# on first use) and HAMi's binary in ../shared/tools/hami-scheduler. ~20-30 min on 2 cores.
# Results: bench-e2e-results/ (scale.md, scale.json, lock.json, release-*.json, preemption.json).
BENCH_E2E_NODES ?= 1000
BENCH_E2E_PODS ?= 5000
# Side by side in one run: kube-scheduler alone, alone plus HAMi's per-pod protocol writes, hami-fast
# (default; HAMi's patch order; the opt-in order behind the answer), HAMi's binary.
BENCH_E2E_RUNS ?= no-extender,no-extender+hami-writes,hami-fast,hami-fast:--allocation-write=filter,hami-fast:--allocation-write=behind-answer,hami
BENCH_E2E_DEFAULT_RUNS ?= hami-fast,hami
.PHONY: bench-e2e
bench-e2e: install ## side by side with HAMi's real scheduler at 1,000 KWOK nodes x 8 GPUs, 5,000 pods; lock stalls; failover of 1,000 pods
	@mkdir -p bench-e2e-results
	export PATH="$$PATH:/usr/local/go/bin"; \
	HELM="$$(scripts/install-helm.sh)" KWOK_BIN="$$(scripts/build-kwok.sh)" \
	KUBE_BIN_DIR="$$(BUILD_CONTROLLER_MANAGER=1 scripts/build-control-plane.sh)" \
	HAMI_FAST_E2E=1 HAMI_FAST_E2E_REQUIRE=1 HAMI_FAST_E2E_RESULTS="$(CURDIR)/bench-e2e-results" \
	HAMI_FAST_E2E_SCALE_NODES=$(BENCH_E2E_NODES) HAMI_FAST_E2E_SCALE_PODS=$(BENCH_E2E_PODS) \
	HAMI_FAST_E2E_SCALE_RUNS=$(BENCH_E2E_RUNS) HAMI_FAST_E2E_SCALE_DEFAULT_RUNS=$(BENCH_E2E_DEFAULT_RUNS) \
	HAMI_FAST_E2E_SCALE_DEFAULT_PODS=20 HAMI_FAST_E2E_SCALE_HAMI_BUDGET=120 HAMI_FAST_E2E_LOCK_PODS=40 HAMI_FAST_E2E_LOCK_HAMI_BUDGET=180 \
	HAMI_FAST_E2E_RELEASE_PAIRS=20 HAMI_FAST_E2E_RELEASE_HAMI_BUDGET=330 HAMI_FAST_E2E_PREEMPT_ROUNDS=10 \
	HAMI_FAST_E2E_FAILOVER=1 HAMI_FAST_E2E_FAILOVER_PODS=1000 HAMI_FAST_E2E_FAILOVER_PAUSED_PODS=300 \
	$(PY) -m pytest tests/e2e/test_e2e_scale.py tests/e2e/test_e2e_side_by_side.py tests/e2e/test_e2e_failover.py \
	  -k "scale or lock or holder_goes or preempts or failover or paused or restarting" -v -s -rs

# GPU map: the page in headless Chromium (Debian's package); screenshots in $(ARTIFACTS)/gpumap/
ARTIFACTS ?= $(CURDIR)/artifacts
.PHONY: test-browser
test-browser: install ## GPU map page in headless Chromium; keeps the screenshots in artifacts/gpumap/
	scripts/install-browser.sh
	HAMI_FAST_REQUIRE_BROWSER=1 HAMI_FAST_ARTIFACTS=$(ARTIFACTS) $(PY) -m pytest tests/descheduler/test_gpumap.py -q -rs -s -k page_
	@ls -1 $(ARTIFACTS)/gpumap/*.png
