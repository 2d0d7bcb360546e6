#!/usr/bin/env bash
# End to end on kind (needs Docker): build the image, create a kind cluster with DRA on,
# load the image, install the chart (2 replicas, leader election) and run e2e/tests
# against it. The cluster is deleted afterwards unless KEEP_CLUSTER=1.
#
# Variables: KIND_CLUSTER_NAME (draview-e2e), KIND_NODE_IMAGE (kindest/node:v1.36.0; any
# v1.36 node image), IMAGE (draview:e2e), KIND, HELM, KUBECTL, DOCKER, PYTHON (binaries;
# kind and helm are built from their Go modules into ~/.cache/draview-tools when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${KIND_CLUSTER_NAME:-draview-e2e}
NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.36.0}
IMAGE=${IMAGE:-draview:e2e}
KIND_VERSION=${KIND_VERSION:-v0.33.0}
TOOLS=${DRAVIEW_TOOLS:-$HOME/.cache/draview-tools}
DOCKER=${DOCKER:-docker}
KUBECTL=${KUBECTL:-kubectl}
PYTHON=${PYTHON:-python3}
NAMESPACE=draview

log() { printf '== %s\n' "$*" >&2; }

if [ -z "${KIND:-}" ]; then
  if command -v kind >/dev/null; then
    KIND=$(command -v kind)
  else
    KIND="$TOOLS/kind-$KIND_VERSION/kind"
    if [ ! -x "$KIND" ]; then
      log "building kind $KIND_VERSION"
      GOBIN="$(dirname "$KIND")" go install "sigs.k8s.io/kind@$KIND_VERSION"
    fi
  fi
fi
HELM=${HELM:-$(e2e/deploy-checks.sh --print-helm)}
command -v "$KUBECTL" >/dev/null || { echo "kubectl not found (set KUBECTL)" >&2; exit 1; }

workdir=$(mktemp -d)
export KUBECONFIG="$workdir/kubeconfig"
cleanup() {
  if [ "${KEEP_CLUSTER:-}" = 1 ]; then
    log "keeping cluster $CLUSTER; KUBECONFIG=$KUBECONFIG"
  else
    "$KIND" delete cluster --name "$CLUSTER" >&2 || true
    rm -rf "$workdir"
  fi
}
trap cleanup EXIT

log "building $IMAGE"
"$DOCKER" build -t "$IMAGE" .

log "creating kind cluster $CLUSTER ($NODE_IMAGE)"
"$KIND" create cluster --name "$CLUSTER" --image "$NODE_IMAGE" \
  --config e2e/kind/kind-config.yaml --kubeconfig "$KUBECONFIG" --wait 180s
"$KIND" load docker-image "$IMAGE" --name "$CLUSTER"

log "installing the chart"
"$KUBECTL" create namespace "$NAMESPACE"
"$KUBECTL" label namespace "$NAMESPACE" pod-security.kubernetes.io/enforce=restricted
"$HELM" upgrade --install draview charts/draview --namespace "$NAMESPACE" \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" \
  --set image.pullPolicy=Never --wait --timeout 5m
"$KUBECTL" -n "$NAMESPACE" rollout status deployment/draview --timeout=180s
"$KUBECTL" get rpst

log "running e2e/tests"
DRAVIEW_KUBECTL=$(command -v "$KUBECTL") "$PYTHON" -m pytest -q -p no:cacheprovider \
  -o testpaths=e2e/tests e2e/tests "$@"
