// Package manifests holds what an operator applies to a real cluster: the
// CRDs (crds/, generated from the controller's API types), RBAC, the
// controller Deployment and the agent DaemonSet. The files are embedded so
// tests can apply exactly what ships (see itest/manifests).
package manifests

import "embed"

// Files are the YAML manifests, CRDs included.
//
//go:embed *.yaml crds/*.yaml
var Files embed.FS
