// Package service holds the integration tests of the service plugin:
// three harness nodes joined to a real apiserver, each with its own
// ovs-vswitchd on the userspace datapath and the agent running podnet,
// tunnel and service; pods attached by CNI; Services created in the
// apiserver and real packets sent to their ClusterIPs. No kube-proxy runs
// anywhere. The EndpointSlice controller is not in the harness yet, so
// the tests write each Service's EndpointSlice themselves, as that
// controller would for ready pods.
//
// Tests need root, OVS and the pinned kube-apiserver (make tools). The
// benchmark (bench_test.go, part of make bench) measures the connection
// rate to a ClusterIP with 1 and with 10,000 Services present and the
// cold-start program time of 10,000 Services; the kube-proxy baseline the
// issue names is not in it yet.
package service
