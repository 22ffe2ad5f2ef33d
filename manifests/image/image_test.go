package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func spec(files ...File) Spec {
	return Spec{
		Layers:     []Layer{{Name: "one", Files: files}},
		Entrypoint: []string{"/usr/local/bin/x"},
		User:       "65532:65532",
		Epoch:      time.Unix(0, 0),
	}
}

// The same files in another order give the same image: the digest depends
// on content only.
func TestBuildIsReproducible(t *testing.T) {
	a := File{Path: "/usr/local/bin/x", Mode: 0o755, Data: []byte("x")}
	b := File{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")}
	i1, err := Build(spec(a, b))
	if err != nil {
		t.Fatal(err)
	}
	i2, err := Build(spec(b, a))
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := i1.Digest()
	d2, _ := i2.Digest()
	if d1 != d2 {
		t.Errorf("same files, other order: digests %s and %s differ", d1, d2)
	}
	i3, _ := Build(spec(a, File{Path: "/etc/passwd", Mode: 0o600, Data: b.Data}))
	if d3, _ := i3.Digest(); d3 == d1 {
		t.Errorf("a mode change did not change the digest")
	}
}

type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	MTime    int64
	Link     string
	Body     string
}

func TestLayerEntries(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := Build(spec(
		File{Path: "/usr/bin/b", Mode: 0o755, Src: src},
		File{Path: "/tmp", Mode: 0o1777, Dir: true},
		File{Path: "/lib64/ld.so", Link: "/lib/ld.so"},
		File{Path: "/a", Mode: 0o644, Data: []byte("mem")},
	))
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.Unix(), h.Linkname, string(body)})
	}
	want := []entry{
		{Name: "a", Type: tar.TypeReg, Mode: 0o644, Body: "mem"},
		{Name: "lib64", Type: tar.TypeDir, Mode: 0o755},
		{Name: "lib64/ld.so", Type: tar.TypeSymlink, Mode: 0o777, Link: "/lib/ld.so"},
		{Name: "tmp", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "usr", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/b", Type: tar.TypeReg, Mode: 0o755, Body: "from disk"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("layer entries (-want +got):\n%s", d)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Created.Unix() != 0 || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config: user %q created %v os %s arch %s", cf.Config.User, cf.Created, cf.OS, cf.Architecture)
	}
}

func TestLayerRejects(t *testing.T) {
	for name, files := range map[string][]File{
		"duplicate": {{Path: "/x", Mode: 0o644}, {Path: "x", Mode: 0o600}},
		"root":      {{Path: "/", Dir: true, Mode: 0o755}},
		"no mode":   {{Path: "/x", Data: []byte("x")}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Build(spec(files...)); err == nil {
				t.Errorf("Build accepted %v", files)
			}
		})
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	img, err := Build(spec(File{Path: "/x", Mode: 0o644, Data: []byte("x")}))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "x.tar")
	if err := WriteArchive(file, "switchyard/x:1.0", img); err != nil {
		t.Fatal(err)
	}
	back, err := ReadArchive(file, "switchyard/x:1.0")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, err := back.Digest()
	if err != nil || d1 != d2 {
		t.Errorf("read back digest %s (%v), wrote %s", d2, err, d1)
	}
}

// resolveIn never leaves root, even for an absolute link, which on the
// build machine would name the machine's own file.
func TestResolveInStaysInRoot(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "lib/x86_64-linux-gnu"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "lib64"), 0o755))
	must(os.WriteFile(filepath.Join(root, "lib/x86_64-linux-gnu/libfoo.so.1.2"), []byte("foo"), 0o644))
	must(os.Symlink("libfoo.so.1.2", filepath.Join(root, "lib/x86_64-linux-gnu/libfoo.so.1")))
	must(os.Symlink("/lib/x86_64-linux-gnu/libfoo.so.1", filepath.Join(root, "lib64/foo")))
	must(os.Symlink("/etc/hostname", filepath.Join(root, "lib64/escape")))
	for _, tc := range []struct{ in, want string }{
		{"/lib/x86_64-linux-gnu/libfoo.so.1", "/lib/x86_64-linux-gnu/libfoo.so.1.2"},
		{"/lib64/foo", "/lib/x86_64-linux-gnu/libfoo.so.1.2"},
	} {
		got, err := resolveIn(root, tc.in)
		if err != nil || got != filepath.Join(root, tc.want) {
			t.Errorf("resolveIn(%s) = %s, %v; want %s", tc.in, got, err, filepath.Join(root, tc.want))
		}
	}
	if got, err := resolveIn(root, "/lib64/escape"); err == nil {
		t.Errorf("resolveIn followed an absolute link out of root to %s", got)
	}
}
