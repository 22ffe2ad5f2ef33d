#!/usr/bin/env bash
# Regenerates the Go code for every .proto file in the repository, next to
# the file, with protoc and the pinned protoc-gen-go / protoc-gen-go-grpc
# (the Makefile's proto target puts them first in PATH).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.proto')
for f in "${files[@]}"; do
  d=$(dirname "$f")
  protoc -I "$d" \
    --go_out="$d" --go_opt=paths=source_relative \
    --go-grpc_out="$d" --go-grpc_opt=paths=source_relative \
    "$f"
  echo "proto: $f"
done
