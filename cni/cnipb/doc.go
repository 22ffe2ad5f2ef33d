// Package cnipb holds the generated gRPC contract between the switchyard-cni
// binary and the agent host's CNI server. Start at cni.proto; the *.pb.go
// files are generated and committed.
//
// The generators are pinned and installed into the repository's bin/:
//
//	GOBIN=/work/main/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	GOBIN=/work/main/bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
//
// and the code is regenerated (with protoc 3.21.12) by `go generate ./cni/cnipb`.
package cnipb

//go:generate sh -c "PATH=../../bin:$PATH protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative cni.proto"
