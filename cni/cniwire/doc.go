// Package cniwire is the protocol between the thin CNI binary and the
// agent: one JSON request and one JSON response per connection on the
// agent's CNI socket.
//
// kubelet's runtime executes the binary for every ADD and DEL, so its
// start-up is on every pod's critical path. The agent's gRPC API made the
// binary pull in gRPC and protobuf, whose package initialisation and size
// cost more than the call itself; this package uses the standard library
// only, and the agent serves it on the same socket as gRPC (cni/cnimux).
package cniwire
