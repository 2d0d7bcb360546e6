# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared settings of the e2e/node scripts (sourced, not executed).
#
# Every address below lives on an interface the node scripts create and remove themselves
# (a port-less bridge for the node and the API server, the CNI bridge for Pods); a FORWARD
# rule drops anything a Pod sends past the bridge, so no packet leaves the machine.

node_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_cache="${DRAVIEW_NODE_CACHE:-${HOME}/.cache/draview-node}"
node_state="${DRAVIEW_NODE_DIR:-${node_cache}/run}"
node_logs="${node_state}/logs"
node_pids="${node_state}/pids"

node_name="${DRAVIEW_NODE_NAME:-draview-node}"
# The node's address, also the API server's published endpoint (kube-apiserver binds to it).
node_ip="${DRAVIEW_NODE_IP:-10.243.0.1}"
node_if=draview0
pod_cidr="${DRAVIEW_NODE_POD_CIDR:-10.244.0.0/24}"
pod_gateway="${pod_cidr%.0/*}.1"
bridge=draview-cni0
service_cidr=10.0.0.0/24

# containerd's own directories: nothing under /var/lib/containerd or /run/containerd, so a
# containerd of the host (if any) is never touched.
ctr_root="${node_state}/containerd/root"
ctr_state="${node_state}/containerd/state"
ctr_sock="${node_state}/containerd/containerd.sock"
ctr_config="${node_state}/containerd/config.toml"
kubelet_root="${node_state}/kubelet"
cdi_dir="${node_state}/cdi"
# Pods' cgroups live under this parent in every v1 hierarchy; `down` removes it whole.
cgroup_parent=draview-node
cni_conf_dir="${node_state}/cni/net.d"
cni_bin_dir="${DRAVIEW_NODE_CNI_BIN:-/usr/lib/cni}"
# The sysctls a node changes (the kubelet sets kernel.panic*, forwarding is ours); `down`
# puts back what `up` found.
node_sysctls=(kernel.panic kernel.panic_on_oops net.ipv4.ip_forward)

# Processes in start order; `down` stops them in reverse.
node_components=(containerd kubelet kube-proxy)

# The images the node runs, all built here (no registry is needed).
pause_image="draview.local/pause:3.10"

node_log() { echo "$(basename "$0"): $*" >&2; }

# apt-get install, one at a time across the scripts that install what they miss (two may
# run side by side under e2e/prebuild): dpkg takes its lock without waiting.
apt_install() {
    (
        flock 7
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
    ) 7>"${TMPDIR:-/tmp}/draview-apt.lock"
}

# node_pid_alive NAME: the recorded process of component NAME runs.
node_pid_alive() {
    local f="${node_pids}/$1.pid" pid
    [[ -f "${f}" ]] || return 1
    pid="$(cat "${f}")"
    [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null || return 1
    [[ "$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" != Z ]]
}

# node_go: the Go toolchain, as e2e/cluster/build finds it.
node_go() {
    if [[ -n "${GO:-}" ]]; then
        echo "${GO}"
    elif command -v go >/dev/null 2>&1; then
        command -v go
    elif [[ -x /usr/local/go/bin/go ]]; then
        echo /usr/local/go/bin/go
    else
        node_log "no Go toolchain found (set GO=/path/to/go)"
        return 1
    fi
}

# ctr_cmd ARGS...: ctr against the node's containerd, in the namespace the kubelet uses.
ctr_cmd() { "${node_cache}/containerd/bin/ctr" --address "${ctr_sock}" -n k8s.io "$@"; }
