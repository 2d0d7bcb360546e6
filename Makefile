# One entry point for people and CI. `make test` sets up and runs everything CI runs.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup lint test test-suites test-unit test-fidelity test-integration test-matrix test-node deploy-checks cluster cluster-down node node-down demo demo-down bench clean

setup:
	$(PIP) install -q -e '.[test]'

lint: setup
	$(PYTHON) -m ruff check operator tests e2e $(wildcard bench)
	$(PYTHON) -m ruff format --check operator/draview tests/unit
	MYPYPATH=operator $(PYTHON) -m mypy
	cd operator && lint-imports --config ../pyproject.toml

test-unit: setup
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/unit

# The allocator is the judge: random worlds, every device, against the real allocator
# library (e2e/oracle, built from Go modules and cached in ~/.cache/draview-oracle).
test-fidelity: setup
	$(PYTHON) -m pytest -q -p no:cacheprovider -o testpaths=tests/fidelity tests/fidelity

# Builds (cached in ~/.cache/draview-cluster) and starts the local control plane; the
# run-wide fixture in tests/kubecluster.py stops it again when it started it.
# hadolint, helm lint/template, manifest freshness, promtool rule tests, shellcheck; installs
# what it misses (prometheus and shellcheck from Debian, helm from its Go module, cached).
deploy-checks:
	e2e/deploy-checks.sh

test-integration: setup deploy-checks
	e2e/cluster/build
	$(PYTHON) -m pytest -q -p no:cacheprovider -o testpaths=tests/integration tests/integration e2e/tests

# The live smoke (tests/matrix) on a control plane of each supported release in turn,
# each built from its own Go modules (e2e/releases) and cached apart.
MATRIX_RELEASES ?= 1.34 1.35 1.36 1.37
test-matrix: setup
	@for r in $(MATRIX_RELEASES); do \
	  echo "== Kubernetes $$r"; \
	  e2e/cluster/build $$r >/dev/null || exit 1; \
	  DRAVIEW_K8S_VERSION=$$r $(PYTHON) -m pytest -q -p no:cacheprovider -o testpaths=tests/matrix \
	    tests/matrix || exit 1; \
	done

# draview as users run it: its image built from the Dockerfile, `helm install`ed as two
# Pods on a real kubelet node (containerd, runc, CNI, kube-proxy) beside the local control
# plane, following Kubernetes' DRA test driver (e2e/node/README.md). Needs root; where the
# machine cannot run a node it says why in one line and fails.
NODE_RELEASE ?=
test-node: setup deploy-checks
	e2e/node/test $(NODE_RELEASE)

# Everything CI runs. The later suites' builds (control planes of every release, the
# node) start at once in the background at low priority (e2e/prebuild), while the
# first suites keep a core busy; they stop when the suites end, passed or not.
test:
	@e2e/prebuild --start
	@status=0; $(MAKE) --no-print-directory test-suites || status=$$?; e2e/prebuild --stop; exit $$status

test-suites: lint test-unit test-fidelity test-integration test-matrix test-node

cluster:
	e2e/cluster/build
	e2e/cluster/up

cluster-down:
	e2e/cluster/down

# The control plane with a real node; `make node-down` stops both.
node:
	e2e/node/up
	e2e/node/driver

node-down:
	e2e/node/down

# Engine benchmark (bench/engine/README.md): ratios against the JSON decode floor, RSS, one
# pool; then `fit` of one MIG claim to the maximum on the same world.
bench: setup
	$(PYTHON) bench/engine/generate.py
	$(PYTHON) bench/engine/run.py
	$(PYTHON) bench/engine/fit.py
	$(PYTHON) bench/engine/probe.py

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/out

# The main demo: local control plane, CRDs, the operator, the cluster-ready examples.
# The operator keeps running in the background (log: demo-operator.log); `make demo-down`.
DEMO_EXAMPLES = gpus mig-a100 tpu-multihost shareable-nic taints driver-update
demo: setup
	e2e/cluster/build
	e2e/cluster/up | tail -1 > .demo-env
	. ./.demo-env && K=$$(e2e/cluster/build | tail -1)/kubectl && \
	  $$K apply -k deploy/crds && \
	  $$K wait --for=condition=Established --timeout=60s crd/resourceslicestatuses.draview.io crd/resourcepoolstatuses.draview.io && \
	  { nohup draview run --leader-elect=false --port 18080 --log-format text > demo-operator.log 2>&1 & echo $$! > .demo-operator.pid; } && \
	  $(PYTHON) e2e/load_examples.py --kubectl $$K $(DEMO_EXAMPLES:%=examples/%.yaml) && \
	  sleep 3 && $$K get resourcepoolstatuses,resourceslicestatuses
	@echo "then: . ./.demo-env && kubectl get rpst -o yaml"

# Stops exactly the operator `make demo` started (its pid file), then waits for its
# SIGTERM flush to end; never a pattern match that could hit someone else's process.
demo-down:
	-@if [ -f .demo-operator.pid ]; then \
	  pid=$$(cat .demo-operator.pid); \
	  kill "$$pid" 2>/dev/null && for _ in $$(seq 1 30); do kill -0 "$$pid" 2>/dev/null || break; sleep 1; done; \
	  rm -f .demo-operator.pid; \
	fi
	e2e/cluster/down
	rm -f .demo-env
