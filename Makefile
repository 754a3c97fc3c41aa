# hami_fast task runner. `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

.PHONY: install
install: $(PY) ## build the Rust engine and install hami-fast (editable) with test extras into .venv
	$(PY) -m pip install -q -e '.[test]'

.PHONY: demo
demo: install ## run hami-fast on the built-in demo cluster and schedule a few hundred pods
	$(VENV)/bin/hami-fast demo --pods 300

.PHONY: test-rust
test-rust: ## Rust unit tests of hami-core
	cargo test -p hami-core --quiet

.PHONY: test-python
test-python: install ## pytest suite (contract, differential, CLI)
	$(PY) -m pytest tests -q

.PHONY: test
test: install test-rust test-python ## set up from scratch and run every test

.PHONY: bench
bench: install ## benchmarks, side by side (pytest-benchmark)
	$(PY) -m pytest bench --benchmark-enable --benchmark-only -q -p no:randomly

.PHONY: wheel
wheel: $(PY) ## build a release wheel into dist/
	$(PY) -m pip install -q 'maturin>=1.16,<2'
	$(VENV)/bin/maturin build --release -o dist

# ---- ship it (issue 13): console scripts on PATH, the container image ------------------------------
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
