// The local control plane: one build per supported Kubernetes release. The requirements
// (k8s.io/kubernetes, its staging modules through replace, etcd, and the tool block) live
// in releases/<release>/go.mod and go.sum, which `build` passes with -modfile; this file
// only marks the module root (go reads the -modfile instead).
module draview/e2e/cluster

go 1.26.0
