//go:build tools

// Package tools pins the code generators used by the controller: controller-gen
// for CRD deepcopy and OpenAPI schemas, protoc-gen-go and protoc-gen-go-grpc for
// the distribution API. It is its own module so the generators' dependencies never
// leak into the main module.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
