# Every target does its own set-up: a fresh clone needs only `make run` or `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The stamp is named after the inputs' content, so editing them re-runs the install and nothing else does.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints/ci.txt | sha1sum | cut -c1-12)

# Debian packages the tests use: bubblewrap is the codegen reward sandbox. (SLURM, munge and MariaDB are installed by
# scripts/dev_cluster.sh when the tests first start the dev cluster.)
SYSTEM_PACKAGES := bubblewrap

.PHONY: setup system-deps run test bench lint clean
setup: $(STAMP)

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "apt-get install$$missing"; apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1; \
	    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (sudo apt-get install$$missing)"; fi; \
	fi

# Recipe comments sit at column 0, where make reads them as its own: indented, make would echo each one to the user.
# CPU torch first: with no torch present, verl's own requirement would pull a multi-GB CUDA build.
# The bytecode pip would write file by file is written afterwards on every core (a fresh venv: 70 s instead of 94 s on
# 2 cores). It must exist: where PYTHONDONTWRITEBYTECODE is set, every process would compile all it imports (the suite
# took 60 % longer). Like pip, skip what the interpreter cannot compile (torch ships a Python 3.12-only test file).
$(STAMP): pyproject.toml constraints/ci.txt
	@echo "setting up $(VENV): torch (CPU build), verl, Ray and the pinned rest (a few minutes the first time; quiet pip)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --disable-pip-version-check --no-compile 'torch==2.13.0'
	@$(PIP) install --quiet --disable-pip-version-check --no-compile -c constraints/ci.txt -e '.[dev]'
	@$(PY) -m compileall -qq -j 0 $(VENV)/lib || true
	@rm -f $(VENV)/.installed-* && touch $@
	@echo "$(VENV) is ready"

run: setup
	$(PY) launch/run.py $(ARGS)

test: setup system-deps
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup system-deps
	@for b in bench/*.py; do case $$b in */__init__.py|*/common.py) continue;; esac; echo "== $$b"; $(PY) $$b || exit 1; done

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache
