# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared settings of e2e/cluster/up and e2e/cluster/down (sourced, not executed).

state_dir="${DRAVIEW_CLUSTER_DIR:-${HOME}/.cache/draview-cluster/run}"
log_dir="${state_dir}/logs"
pki_dir="${state_dir}/pki"
data_dir="${state_dir}/data"
pid_dir="${state_dir}/pids"
kubeconfig="${state_dir}/kubeconfig"

etcd_port="${DRAVIEW_CLUSTER_ETCD_PORT:-12379}"
etcd_peer_port="${DRAVIEW_CLUSTER_ETCD_PEER_PORT:-12380}"
apiserver_port="${DRAVIEW_CLUSTER_APISERVER_PORT:-16443}"
scheduler_port="${DRAVIEW_CLUSTER_SCHEDULER_PORT:-20259}"
controller_manager_port="${DRAVIEW_CLUSTER_CONTROLLER_MANAGER_PORT:-20257}"

# Components in start order; down stops them in reverse.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler)

# pid_alive PID [NAME]: the process exists, is not a zombie and (given NAME) runs the
# binary NAME, so that a recycled PID is never taken for a component. The binary is read
# from /proc/PID/exe, one readlink, not from a pipeline over its command line.
pid_alive() {
    local pid="$1" name="${2:-}" state exe
    [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
    kill -0 "${pid}" 2>/dev/null || return 1
    state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" || return 1
    [[ "${state}" != Z && -n "${state}" ]] || return 1
    [[ -n "${name}" ]] || return 0
    exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || return 1
    exe="${exe% (deleted)}" # a binary rebuilt while it runs
    [[ "${exe}" == */"${name}" ]]
}

# own_processes: "NAME PID" for every component still running from this state directory,
# whatever its pid file says (lost, or a process a failed start left behind): its command
# line names this directory's files, and its binary is the component's.
own_processes() {
    local pid exe c
    for pid in $(pgrep -f -- "${state_dir}/" 2>/dev/null || true); do
        exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || continue
        exe="${exe% (deleted)}"
        for c in "${components[@]}"; do
            if [[ "${exe}" == */"${c}" ]]; then
                echo "${c} ${pid}"
            fi
        done
    done
}

# Is the recorded process for component $1 alive?
component_running() {
    local f="${pid_dir}/$1.pid"
    [[ -f "${f}" ]] && pid_alive "$(cat "${f}")" "$1"
}

all_running() {
    local c
    for c in "${components[@]}"; do
        component_running "${c}" || return 1
    done
}

any_running() {
    local c
    for c in "${components[@]}"; do
        component_running "${c}" && return 0
    done
    return 1
}

api_ready() {
    [[ -f "${kubeconfig}" && -f "${state_dir}/bin-dir" ]] || return 1
    "$(cat "${state_dir}/bin-dir")/kubectl" --kubeconfig="${kubeconfig}" \
        --request-timeout=5s get --raw /readyz >/dev/null 2>&1
}

port_in_use() {
    (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# sign_in DIR NAME SUBJECT [SAN]: DIR/NAME.key and DIR/NAME.crt signed by the cluster's CA; a
# client certificate, also a serving one for the SANs given. Used by up and by e2e/node/up.
sign_in() {
    local dir="$1" name="$2" subject="$3" san="${4:-}"
    local ext="${dir}/${name}.ext"
    {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        if [[ -n "${san}" ]]; then
            echo "extendedKeyUsage=serverAuth,clientAuth"
            echo "subjectAltName=${san}"
        else
            echo "extendedKeyUsage=clientAuth"
        fi
    } >"${ext}"
    openssl req -newkey rsa:2048 -nodes -subj "${subject}" \
        -keyout "${dir}/${name}.key" -out "${dir}/${name}.csr" 2>>"${log_dir}/openssl.log"
    openssl x509 -req -in "${dir}/${name}.csr" -CA "${pki_dir}/ca.crt" -CAkey "${pki_dir}/ca.key" \
        -CAcreateserial -days 3650 -extfile "${ext}" -out "${dir}/${name}.crt" \
        2>>"${log_dir}/openssl.log"
    rm -f "${dir}/${name}.csr" "${ext}"
}

# kubeconfig_for FILE SERVER DIR CERT_NAME USER: a kubeconfig for the client certificate
# DIR/CERT_NAME.crt (and .key) against SERVER, trusting the cluster's CA.
kubeconfig_for() {
    local file="$1" server="$2" dir="$3" cert="$4" user="$5"
    cat >"${file}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: draview
  cluster:
    server: ${server}
    certificate-authority: ${pki_dir}/ca.crt
users:
- name: ${user}
  user:
    client-certificate: ${dir}/${cert}.crt
    client-key: ${dir}/${cert}.key
contexts:
- name: draview
  context:
    cluster: draview
    user: ${user}
current-context: draview
EOF
}
