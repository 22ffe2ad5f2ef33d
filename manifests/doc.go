// Package manifests holds what an operator applies to a real cluster: the
// CRDs (crds/, generated from the controller's API types), RBAC, the
// controller Deployment and the agent DaemonSet. The files are embedded so
// tests can apply exactly what ships (see itest/manifests).
//
// The controller serves its distribution API with the certificate in the
// Secret switchyard-controller-tls (tls.crt, tls.key, and ca.crt, the CA
// the agents' netpol plugin trusts: the agent mounts that key alone).
package manifests

import "embed"

// Files are the YAML manifests, CRDs included.
//
//go:embed *.yaml crds/*.yaml
var Files embed.FS
