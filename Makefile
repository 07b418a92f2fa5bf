# recio: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# torch for the recio[torch] tests: a CPU build lies on this machine's disk; pinning it keeps pip
# from pulling a multi-GB CUDA build. Where it cannot be installed those tests skip with a reason.
TORCH_PIN ?= torch==2.13.0

.PHONY: install install-dev install-torch test demo bench clean

install:
	$(PIP) install -q -e .

install-dev:
	$(PIP) install -q -e '.[dev,fast]'

install-torch:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install -q '$(TORCH_PIN)' || \
		echo "note: could not install $(TORCH_PIN); the torch tests will be skipped"

test: install-dev install-torch
	$(PYTHON) -m pytest -q tests

demo: install
	bash examples/demo.sh

bench: install
	$(PIP) install -q -r benchmarks/requirements.txt
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf build dist *.egg-info .pytest_cache examples/out
