package image

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is the registry our short references (switchyard/switchyard-agent:v)
// resolve to: the one container runtimes assume for a name without a host,
// so the tag in the archive is the one a Pod's image field names.
const Registry = "docker.io"

// Tag parses a short reference such as switchyard/switchyard-agent:v1.
func Tag(ref string) (name.Tag, error) {
	return name.NewTag(ref, name.WithDefaultRegistry(Registry))
}

// WriteArchive writes img tagged ref as a docker-archive tarball (the
// `docker save` format, with an OCI-compatible manifest.json), which both
// `ctr images import` and `docker load` read.
func WriteArchive(file, ref string, img v1.Image) error {
	tag, err := Tag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	return tarball.MultiRefWriteToFile(file, map[name.Reference]v1.Image{tag: img})
}

// ReadArchive reads back the image tagged ref from an archive WriteArchive
// wrote.
func ReadArchive(file, ref string) (v1.Image, error) {
	tag, err := Tag(ref)
	if err != nil {
		return nil, err
	}
	return tarball.ImageFromPath(file, &tag)
}
