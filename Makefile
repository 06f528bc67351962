# Two commands on a fresh machine: `make demo` and `make test` (`make docs` builds the documentation site).
# Both create .venv with pip when it is missing and install into it exactly the versions pinned (with
# hashes) in requirements/*.lock, then topicflow itself. `make lock` refreshes the locks from the ranges in
# pyproject.toml. See docs/development.md.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.installed-bench-stamp
TESTS ?= tests
# pytest-xdist workers of `make test` (the CI machine has 2 cores; 0 runs the suite in one process).
TEST_WORKERS ?= 2
# bench_vb_lda.py needs a corpus: a small generated one by default (about 2 min on 2 cores);
# e.g. make bench BENCH_ARGS="--jsonl corpus.jsonl --topics 20 100"
BENCH_ARGS ?= --synth-docs 5000 --topics 20

# Python caches each module it compiles (__pycache__, git-ignored) unless PYTHONDONTWRITEBYTECODE is set, as
# it is on some CI images: then every process of the suite (each Dask worker, each CLI run, each notebook
# kernel) compiles dask, distributed, numpy and topicflow from source again, about 2 s per process. The
# recipes here run without it; the package's own behaviour does not depend on it.
unexport PYTHONDONTWRITEBYTECODE

PIP_LOCK := requirements/pip.lock
TEST_LOCK := requirements/test.lock
BENCH_LOCK := requirements/bench.lock
LOCKFILE := $(PYTHON) scripts/lockfile.py

# `make lock` only: uv in a throwaway venv; make test/demo/bench never need it.
UV_VERSION := 0.13.9
LOCK_VENV := build/lock/uv-$(UV_VERSION)
UV := $(LOCK_VENV)/bin/uv
UV_COMPILE := $(UV) pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --custom-compile-command "make lock"
# --upgrade: the newest releases the ranges allow. `make lock LOCK_FLAGS=` keeps the current pins where
# they still satisfy pyproject.toml (e.g. after adding one dependency).
LOCK_FLAGS ?= --upgrade

.PHONY: demo test test-faults docs bench lock check-lock check-bench-lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall whenever the locks or pyproject.toml change, so a green run never hides a missing dependency.
# pip itself comes first, from its own lock, so every machine installs with the same pip.
# --no-build-isolation: topicflow is built with the locked setuptools, not whatever PyPI has today.
# --no-compile: pip would byte-compile every installed file (about 2/3 of the install's CPU, most of it for
# modules never imported); Python compiles what is imported when it is first imported instead.
$(STAMP): pyproject.toml $(PIP_LOCK) $(TEST_LOCK) | check-lock $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(PIP_LOCK)
	$(BIN)/python -m pip install --quiet --no-compile --require-hashes -r $(TEST_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $@

$(BENCH_STAMP): $(BENCH_LOCK) $(STAMP) | check-bench-lock
	$(BIN)/python -m pip install --quiet --no-compile --require-hashes -r $(BENCH_LOCK)
	$(BIN)/python -m pip check
	touch $@

check-lock:
	@$(LOCKFILE) check $(TEST_LOCK) --extra test

check-bench-lock:
	@$(LOCKFILE) check $(BENCH_LOCK) --extra test --extra bench --constraint $(TEST_LOCK)

demo: $(STAMP)
	$(BIN)/python -m topicflow.cli.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(TESTS)

# Only the fault-matrix tests (docs/reliability.md, "Fault matrix"); `make test` runs them too.
test-faults: $(STAMP)
	$(BIN)/python -m pytest -q tests/pipeline/test_fault_matrix_faults.py tests/pipeline/test_fault_matrix_cluster.py

# The documentation site (docs/conf.py): warnings are errors, every reference must resolve (-n), and the
# notebooks run at build time (cached in build/docs/.jupyter_cache). See docs/development.md.
DOCS_OUT := build/docs
docs: $(STAMP)
	$(BIN)/python -m sphinx -b html -n -W --keep-going -d $(DOCS_OUT)/doctrees docs $(DOCS_OUT)/html
	@echo "Open $(DOCS_OUT)/html/index.html"

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench_vb_lda.py $(BENCH_ARGS)

$(UV):
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION)

# test.lock: dependencies + [test] + [build-system].requires + pip. bench.lock: the same + [bench], resolved
# with test.lock as constraints, so installing it on top of .venv changes no tested version.
lock: $(UV)
	mkdir -p requirements
	$(LOCKFILE) tools > build/lock/build-system-and-pip.in
	$(UV_COMPILE) $(LOCK_FLAGS) pyproject.toml build/lock/build-system-and-pip.in --extra test -o $(TEST_LOCK)
	$(LOCKFILE) stamp $(TEST_LOCK) --extra test
	$(UV_COMPILE) $(LOCK_FLAGS) pyproject.toml build/lock/build-system-and-pip.in --extra test --extra bench \
		-c $(TEST_LOCK) -o $(BENCH_LOCK)
	$(LOCKFILE) stamp $(BENCH_LOCK) --extra test --extra bench --constraint $(TEST_LOCK)
	echo pip | $(UV_COMPILE) $(LOCK_FLAGS) - -c $(TEST_LOCK) -o $(PIP_LOCK)
	@echo "Locks refreshed. Now run make test on them, and commit requirements/ only if it passes."

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info
