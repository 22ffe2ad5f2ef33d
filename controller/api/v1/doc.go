// Package apiv1 is the generated gRPC API between switchyard-controller and
// the nodes: the PolicyDistribution service (distribution.proto). Edit the
// .proto, then run `go generate ./controller/api/...` from the repository
// root; never edit the .pb.go files.
package apiv1

//go:generate bash ../../hack/gen-proto.sh
