// Package controlplane runs a real Kubernetes control plane for tests and the
// demo: etcd and kube-apiserver v1.37.2 on loopback, with TLS from a CA made
// per run, static-token authentication for the admin, RBAC authorization and
// service-account token signing (TokenRequest and TokenReview work).
//
// Start(t) is the entry point; it returns once /readyz answers ok.
package controlplane
