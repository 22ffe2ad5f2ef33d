package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer. Exactly one of Data, Src, Link or Dir says
// what it is.
type File struct {
	// Path is absolute inside the image, e.g. /usr/local/bin/yardctl.
	Path string
	// Mode is the permission bits (0o755, 0o644, 0o1777 for /tmp).
	Mode int64
	// Data is the content of a regular file given in memory.
	Data []byte
	// Src is a file on the build machine whose content is copied (links
	// are followed: the image gets a regular file).
	Src string
	// Link makes the entry a symbolic link to this target.
	Link string
	// Dir makes the entry a directory.
	Dir bool
}

// Layer is a named list of files; the name goes into the image history so
// `docker history` says what each layer is.
type Layer struct {
	Name  string
	Files []File
}

// Spec describes one image.
type Spec struct {
	Layers     []Layer
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	Labels     map[string]string
	// Epoch is every timestamp in the image (files, config, history).
	Epoch time.Time
}

// dirMode is what implicit parent directories get.
const dirMode = 0o755

// tarLayer writes files as a tar stream, sorted by path, with every parent
// directory present before its children, so the bytes depend only on the
// files, never on the order they were listed in or on the build machine.
func tarLayer(files []File, epoch time.Time) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			return nil, fmt.Errorf("image: a file needs a path below /")
		}
		if old, dup := entries[p]; dup && !(old.Dir && f.Dir) {
			return nil, fmt.Errorf("image: %s listed twice in one layer", p)
		}
		f.Path = p
		entries[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Path: d, Dir: true, Mode: dirMode}
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := entries[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    f.Mode,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		var body []byte
		switch {
		case f.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
			if hdr.Mode == 0 {
				hdr.Mode = 0o777
			}
		case f.Src != "":
			b, err := os.ReadFile(f.Src)
			if err != nil {
				return nil, fmt.Errorf("image: %s: %w", p, err)
			}
			body = b
		default:
			body = f.Data
		}
		if !f.Dir && f.Link == "" {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(body))
		}
		if hdr.Mode == 0 {
			return nil, fmt.Errorf("image: %s has no mode", p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Build assembles the image: one layer per Spec.Layers entry, on an empty
// base, with a config whose every timestamp is the epoch.
func Build(s Spec) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.DockerManifestSchema2)
	img = mutate.ConfigMediaType(img, types.DockerConfigJSON)
	created := v1.Time{Time: s.Epoch.UTC()}
	for _, l := range s.Layers {
		data, err := tarLayer(l.Files, s.Epoch)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Name, err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithCompressionLevel(gzip.BestCompression))
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Name, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: created, CreatedBy: "switchyard build-images: " + l.Name},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = created
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.Env = s.Env
	cf.Config.User = s.User
	cf.Config.WorkingDir = s.WorkingDir
	cf.Config.Labels = s.Labels
	return mutate.ConfigFile(img, cf)
}
