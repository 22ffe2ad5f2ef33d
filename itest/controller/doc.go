// Package controller holds the integration tests of switchyard-controller
// against a real etcd + kube-apiserver (itest/controlplane). The controller
// runs in-process through controller/app, the same wiring as the binary;
// test clients act as nodes over real gRPC with real pod-bound
// ServiceAccount tokens.
//
// Start with TestController in controller_test.go; nodeclient_test.go is the
// node-side client that applies the stream into a model.
package controller
