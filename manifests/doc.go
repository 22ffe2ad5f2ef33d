// Package manifests holds what an operator applies to a real cluster: the
// CRDs (crds/, generated from the controller's API types), RBAC, the
// controller Deployment, the OVS DaemonSet and the agent DaemonSet with its
// ConfigMap. Render joins them into switchyard.yml (`make manifests`), the
// one file an operator applies; uninstall.yaml is the cleanup DaemonSet.
// The files are embedded so tests can apply exactly what ships (see
// itest/manifests). Images are built by cmd/build-images (`make images`),
// with the package image; docs/ is the operator documentation.
//
// The controller serves its distribution API with the certificate in the
// Secret switchyard-controller-tls, which it creates (self-signed, with its
// CA) when absent, and publishes the CA alone in the ConfigMap
// switchyard-controller-ca, which the agents read through the apiserver.
package manifests

import "embed"

// Files are the YAML manifests, CRDs included.
//
//go:embed VERSION *.yaml *.yml crds/*.yaml
var Files embed.FS
