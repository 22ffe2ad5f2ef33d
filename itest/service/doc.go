// Package service holds the integration tests of the service plugin:
// three harness nodes joined to a real apiserver, each with its own
// ovs-vswitchd on the userspace datapath and the agent running podnet,
// tunnel and service; pods attached by CNI; Services created in the
// apiserver and real packets sent to their ClusterIPs. No kube-proxy runs
// in the tests. The EndpointSlice controller is not in the harness yet, so
// the tests write each Service's EndpointSlice themselves, as that
// controller would for ready pods.
//
// Tests need root, OVS and the pinned kube-apiserver (make tools). The
// benchmark (bench_test.go, part of make bench) measures the plugin
// against kube-proxy v1.37.2 in nftables mode on the same cluster, the
// service plugin off while kube-proxy runs (kubeproxy_test.go, startWith
// proxyKube): connection rate to a ClusterIP with 1 and with 10,000
// Services, cold-start program time and one endpoint change at 10,000,
// and resident sets. Its kube-proxy is built on demand (make
// tools-bench), never by make tools.
package service
