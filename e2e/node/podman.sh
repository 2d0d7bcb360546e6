# shellcheck shell=bash
# podman with the node's own configuration and storage (sourced by the e2e/node scripts,
# after lib.sh).
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC2154
# This host's limits shape the configuration: no process may raise a hard rlimit, so the
# containers' ulimits stay at or below the host's; crun refuses cgroup v1 hybrid layouts,
# so runc runs them.

podman_dir="${node_cache}/podman"

pm() {
    local conf="${podman_dir}/containers.conf" storage="${podman_dir}/storage.conf"
    if [[ ! -f "${conf}" || ! -f "${storage}" ]]; then
        mkdir -p "${podman_dir}"
        local nofile
        nofile="$(ulimit -Hn)"
        [[ "${nofile}" == unlimited ]] && nofile=1048576
        cat >"${conf}" <<EOF
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
        cat >"${storage}" <<EOF
[storage]
driver = "overlay"
graphroot = "${podman_dir}/storage"
runroot = "${podman_dir}/runroot"
EOF
    fi
    CONTAINERS_CONF="${conf}" CONTAINERS_STORAGE_CONF="${storage}" podman "$@"
}

# pm_build ARGS...: a build whose RUN steps use the host's network, so that podman creates
# no bridge, iptables rules or forwarding of its own.
pm_build() { pm build --network host "$@"; }

# load_image REF: copy an image from podman's storage into the node's containerd, where
# the kubelet finds it (Pods use imagePullPolicy IfNotPresent or Never).
load_image() {
    local ref="$1" archive
    archive="$(mktemp "${TMPDIR:-/tmp}/draview-image.XXXXXX")"
    pm save --quiet --format oci-archive --output "${archive}" "${ref}" >&2
    ctr_cmd images import --base-name "${ref%:*}" "${archive}" >/dev/null
    rm -f "${archive}"
    node_log "loaded ${ref} into the node"
}
