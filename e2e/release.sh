# shellcheck shell=bash
# shellcheck disable=SC2034  # release, k8s_version and dra_version are for the sourcing script
# Sourced by e2e/cluster and e2e/oracle scripts: resolve_release [RELEASE] sets
# release (1.34), k8s_version (v1.34.4) and dra_version (v0.34.13) from e2e/releases,
# or prints one line naming the supported releases and returns 1.
_releases_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/releases"

resolve_release() {
    local wanted="${1:-${DRAVIEW_K8S_VERSION:-}}"
    if [[ -z "${wanted}" ]]; then
        wanted="$(awk '$1 == "default" {print $2}' "${_releases_file}")"
    fi
    wanted="${wanted#v}"
    # 1.35.4 names the minor 1.35.
    if [[ "${wanted}" =~ ^([0-9]+\.[0-9]+)\.[0-9]+$ ]]; then
        wanted="${BASH_REMATCH[1]}"
    fi
    local line
    line="$(awk -v r="${wanted}" '$1 == r {print $1, $2, $3}' "${_releases_file}")"
    if [[ -z "${line}" && "${DRAVIEW_UNSUPPORTED_OK:-}" == 1 ]]; then
        line="$(awk -v r="${wanted}" '$1 == "unsupported" && $2 == r {print $2, $3, $4}' "${_releases_file}")"
    fi
    if [[ -z "${line}" ]]; then
        echo "Kubernetes ${wanted} is not supported; supported releases: $(supported_releases)" >&2
        return 1
    fi
    read -r release k8s_version dra_version <<<"${line}"
}

supported_releases() {
    awk '$1 ~ /^[0-9]+\.[0-9]+$/ {printf "%s%s", sep, $1; sep=" "}' "${_releases_file}"
}
