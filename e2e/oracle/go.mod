// The differential oracle: asks the real DRA allocator (k8s.io/dynamic-resource-allocation/structured)
// whether probe claims fit. One build per supported Kubernetes release: the requirements
// live in releases/<release>/go.mod and go.sum, which `build` passes with -modfile; this
// file only marks the module root (go reads the -modfile instead).
module draview/e2e/oracle

go 1.26.0
