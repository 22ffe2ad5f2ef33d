#!/usr/bin/env bash
# Regenerates the distribution API Go code from controller/api/v1/*.proto
# with the pinned generators: protoc 3.21.12 (system package), protoc-gen-go
# and protoc-gen-go-grpc built from controller/tools/go.mod.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
want="libprotoc 3.21.12"
got="$(protoc --version)"
if [[ "$got" != "$want" ]]; then
  echo "gen-proto: need protoc '$want', found '$got'; install protobuf-compiler 3.21.12" >&2
  exit 1
fi
bin="$root/bin/controller-tools"
mkdir -p "$bin"
(cd "$root/controller/tools" && GOTOOLCHAIN=local GOBIN="$bin" go install \
  google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
cd "$root/controller/api/v1"
protoc -I . \
  --plugin=protoc-gen-go="$bin/protoc-gen-go" --go_out=paths=source_relative:. \
  --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" --go-grpc_out=paths=source_relative:. \
  distribution.proto
