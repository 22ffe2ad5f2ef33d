// Package image assembles Switchyard's container images without a Docker
// engine or a registry: files in, docker-archive tarballs out, loadable by
// `ctr -n k8s.io images import` and `docker load`.
//
// An image is a list of layers, each a list of Files (a path, a mode, and
// bytes or a source file); Build turns them into a go-containerregistry
// v1.Image and WriteArchive writes one or more tagged images into one
// tarball. Everything that could make two builds of the same tree differ is
// fixed here: entries are sorted, parent directories are added explicitly,
// every mtime is the build's epoch (SOURCE_DATE_EPOCH, default 0), owners
// are 0:0, and gzip runs at a fixed level. So the same inputs give the same
// image digest, which image_test checks.
//
// What goes into each product image, where the Open vSwitch files come from
// (Debian packages, ELF-closure trimmed) and how binaries are compiled is
// the job of the command manifests/cmd/build-images; start there.
package image
