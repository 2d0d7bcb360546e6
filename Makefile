# One entry point for people and CI. `make test` sets up and runs everything CI runs.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup lint test test-unit test-integration cluster cluster-down demo bench clean

setup:
	$(PIP) install -q -e '.[test]'

lint: setup
	$(PYTHON) -m ruff check operator tests bench
	$(PYTHON) -m ruff format --check operator/draview tests/unit
	MYPYPATH=operator $(PYTHON) -m mypy
	cd operator && lint-imports --config ../pyproject.toml

test-unit: setup
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/unit

# Builds (cached in ~/.cache/draview-cluster) and starts the local control plane; the
# session fixture in tests/kubecluster.py stops it again when it started it.
test-integration: setup
	e2e/cluster/build
	$(PYTHON) -m pytest -q -p no:cacheprovider -o testpaths=tests/integration tests/integration

test: lint test-unit test-integration

cluster:
	e2e/cluster/build
	e2e/cluster/up

cluster-down:
	e2e/cluster/down

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/out
