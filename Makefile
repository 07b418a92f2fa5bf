# recio: the two commands a newcomer needs are `make demo` and `make test`, run inside a
# virtualenv (python3 -m venv .venv && . .venv/bin/activate). Every step uses $(PYTHON), so
# `make test PYTHON=/path/to/venv/bin/python` works without activating anything.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# torch for the recio[torch] tests. CI (CPython 3.11) installs torch==2.13.0, a CPU build; the
# pin keeps pip from pulling a multi-GB CUDA build. That build exists there for CPython 3.11
# only, so on other Pythons `make test` leaves torch out unless TORCH_PIN names a build to
# install (TORCH_PIN=torch==X.Y.Z), and says so: the torch tests are then reported as skipped,
# each with its reason. A pinned torch that fails to install or import fails `make test`.
ifeq ($(origin TORCH_PIN), undefined)
TORCH_PIN := $(shell $(PYTHON) -c 'import sys; print("torch==2.13.0" if sys.version_info[:2] == (3, 11) else "")' 2>/dev/null)
endif

.PHONY: check-python install install-dev install-torch install-docs check-install lint test \
	test-fast docs site-check demo bench clean

# Refuse, in one line, an interpreter pip may not install into (PEP 668 "externally managed",
# e.g. Debian's /usr/bin/python3 outside a virtualenv, unless pip is configured to install there
# anyway) or one older than recio supports.
check-python:
	@$(PYTHON) .ci/check_python.py

# An editable install leaves recio's bytecode to be compiled on first import, and where
# PYTHONDONTWRITEBYTECODE is set (as on CI machines) on every process start: about 0.2 s per
# command and per Ray worker. Compile it here, as `pip install recio` does for a wheel; Python
# still recompiles (in memory) any module edited since.
COMPILE = $(PYTHON) -m compileall -q -j 0 recio

install: check-python
	$(PIP) install -q -e .
	@$(COMPILE)

install-dev: check-python
	$(PIP) install -q -e '.[dev,plot,remote,ray]'
	@$(COMPILE)

install-torch: check-python
ifneq ($(strip $(TORCH_PIN)),)
	@$(PYTHON) -c 'import torch' 2>/dev/null || $(PIP) install -q '$(TORCH_PIN)'
	@$(PYTHON) -c 'import torch' || \
		{ echo "make: $(TORCH_PIN) was installed but does not import" >&2; exit 1; }
	@# torchdata's StatefulDataLoader, for tests/with_torch/test_torch_resume.py
	@# (--no-deps: keep the pinned torch)
	@$(PYTHON) -c 'import torchdata.stateful_dataloader' 2>/dev/null || $(PIP) install -q --no-deps 'torchdata==0.11.0'
	@$(PYTHON) -c 'import torchdata.stateful_dataloader' || \
		{ echo "make: torchdata==0.11.0 was installed but does not import" >&2; exit 1; }
else
	@$(PYTHON) -c 'import torch' 2>/dev/null || \
		echo "make test: no torch build is pinned for this Python (TORCH_PIN is empty): the torch tests will be reported as skipped"
endif

# After the installs: every requirement of recio and of the extras installed (torch's where a
# build is pinned) is there at a version recio accepts and imports, and the commands run (a list,
# a resized pack, verify). One script for make and for the CI workflow's Windows job, which has
# no make (.ci/check_install.py; tests/meta/test_platforms.py runs it and checks both call it).
check-install:
	$(PYTHON) .ci/check_install.py$(if $(strip $(TORCH_PIN)), --torch)$(if $(strip $(DOCS_PYTHON)), --docs)

# The documentation site (mkdocs.yml, docs/): MkDocs with the Material theme and mkdocstrings,
# whose API pages are generated from the docstrings. The build reads only the checkout.
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2, printed on every build, says nothing
# about this site.
MKDOCS = NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs
# The docs extra's releases need Python 3.11 or newer. On an older Python (CI's oldest is 3.9)
# `make test` says so and leaves the site out, which is the same built by any Python (CI builds
# it on 3.11 and 3.13); `make docs` stops with that line.
DOCS_PYTHON := $(shell $(PYTHON) -c 'import sys; print("yes" if sys.version_info >= (3, 11) else "")' 2>/dev/null)
NO_DOCS = the documentation tools (the docs extra) need Python 3.11 or newer: the site is not built with $(PYTHON)

install-docs: check-python
ifneq ($(strip $(DOCS_PYTHON)),)
	$(PIP) install -q -e '.[docs]'
	@$(PYTHON) -c 'import mkdocs, material, mkdocstrings_handlers.python' || \
		{ echo "make: the docs extra (mkdocs, mkdocs-material, mkdocstrings[python]) installed but does not import" >&2; exit 1; }
else
	@echo "make: $(NO_DOCS)"
endif

# site/index.html: the guides and the API reference
docs: install-docs
	@[ -n "$(DOCS_PYTHON)" ] || { echo "make docs: $(NO_DOCS)" >&2; exit 1; }
	$(MKDOCS) build

# The site's search, in a real headless Chromium over the built site served on 127.0.0.1
# (.ci/site_check.py): option names (--resize) and API names (DataLoader) find the guide that
# explains them first, with no console error, and the pages load nothing from outside the site.
# `make test` runs it after its strict build. CI=true: a missing browser or Playwright fails it
# (the docs extra brings Playwright; Chromium: apt-get install chromium, or
# python -m playwright install chromium; .ci/run installs Debian's).
SITE_CHECK = CI=true $(PYTHON) .ci/site_check.py site
site-check: install-docs
	@[ -n "$(DOCS_PYTHON)" ] || { echo "make site-check: $(NO_DOCS)" >&2; exit 1; }
	$(MKDOCS) build --strict
	$(SITE_CHECK)

# CI=true: a test may not skip, except for an optional dependency left out on purpose here
# (RECIO_TEST_WITHOUT), and pytest -rs lists every skip with its reason.
# The record, index, im2rec and reader tests again, as on a system without Linux's facilities:
# RECIO_TEST_REMOVE=all takes away os.pread/pwrite, madvise, O_NONBLOCK, /proc/self/fd and
# fallocate, and applies Windows' rules for replacing open files (tests/simulate/sitecustomize.py,
# which sees open files through /proc, so this pass runs where /proc is: Linux).
PORTABLE_TESTS := tests/portable \
	$(addprefix tests/records/test_,records.py split.py writer_lifecycle.py index_scale.py) \
	tests/records/shards/test_shards.py \
	$(addprefix tests/image/pack/test_,im2rec.py pack_safety.py pack_fast_paths.py \
		pack_resume.py lists.py list_safety.py) \
	$(addprefix tests/image/tools/test_,repair.py inspect_verify.py) \
	tests/image/batches/test_imageiter.py tests/mx/test_mx_compat.py \
	tests/sequence/test_minibatch.py \
	$(addprefix tests/cli/test_,output_safety.py damaged_files.py)

# Both pytest passes: CI=true, and torch left out on purpose where no build is pinned
TEST_ENV = CI=true RECIO_TEST_WITHOUT='$(if $(strip $(TORCH_PIN)),,torch)'

# The lint: ruff (pyproject.toml's [tool.ruff]; the dev extra pins it) over the library, the
# tests, the benchmarks, the examples and the CI scripts: likely bugs and unused names, no
# restyling. `make test` runs it first.
LINT = $(PYTHON) -m ruff check recio tests benchmarks examples .ci
lint:
	$(LINT)

# The edit-test loop: the whole suite but the tests marked slow (a Ray cluster, a local S3 or GCS
# server, spawned workers, packs in subprocesses, anything taking seconds; pyproject.toml's
# markers), with the lint, in about 1-2 minutes on 2 cores. `make test` runs everything.
test-fast: lint
	$(TEST_ENV) $(PYTHON) -m pytest -q -rs -m "not slow" tests

# The type check: `$(PYTHON) -m mypy recio` (pyproject.toml's [tool.mypy]; the dev extra pins
# mypy) checks the library as a user's type checker reads it (recio ships py.typed).
test: install-dev install-torch install-docs check-install
	@echo "== the lint (ruff)"
	$(LINT)
	@echo "== the type check (mypy)"
	$(PYTHON) -m mypy recio
	$(TEST_ENV) $(PYTHON) -m pytest -q -rs tests
	@if [ -n "$(DOCS_PYTHON)" ]; then \
		echo "== the documentation site, strictly: a broken link, anchor or API reference fails"; \
		$(MKDOCS) build --strict && \
		echo "== the site's search in headless Chromium (make site-check)" && \
		$(SITE_CHECK); fi
	@if [ -d /proc/self/fd ]; then \
		echo "== the same without Linux's facilities (RECIO_TEST_REMOVE=all)"; \
		$(TEST_ENV) RECIO_TEST_REMOVE=all $(PYTHON) -m pytest -q -rs $(PORTABLE_TESTS); fi

demo: install
	PYTHON='$(PYTHON)' bash examples/demo.sh

bench: install
	$(PIP) install -q -r benchmarks/requirements.txt
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache examples/out site
