package image

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Deb is one downloaded Debian package.
type Deb struct {
	Package, Version, Arch string
	// File is the .deb in the cache.
	File string
}

// String is package=version, the form apt-get and image labels use.
func (d Deb) String() string { return d.Package + "=" + d.Version }

// FetchDebs returns the candidate version of each package, downloading the
// ones not yet in cacheDir with `apt-get download`. The cache is keyed by
// package, version and architecture, so a Debian update brings a new file
// and never silently changes an old one.
func FetchDebs(cacheDir string, pkgs []string) ([]Deb, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	var out []Deb
	for _, p := range pkgs {
		d, err := candidate(p)
		if err != nil {
			return nil, err
		}
		d.File = filepath.Join(cacheDir, fmt.Sprintf("%s_%s_%s.deb", d.Package, strings.ReplaceAll(d.Version, ":", "%3a"), d.Arch))
		if _, err := os.Stat(d.File); err != nil {
			if err := download(d, cacheDir); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// candidate asks apt which version `apt-get download` would fetch.
func candidate(pkg string) (Deb, error) {
	out, err := exec.Command("apt-cache", "show", "--no-all-versions", pkg).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return Deb{}, fmt.Errorf("debian package %s: apt-cache knows no version of it (%v); run apt-get update", pkg, err)
	}
	d := Deb{Package: pkg}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		switch {
		case !ok:
		case k == "Version":
			d.Version = v
		case k == "Architecture":
			d.Arch = v
		}
	}
	if d.Version == "" || d.Arch == "" {
		return Deb{}, fmt.Errorf("debian package %s: no Version/Architecture in apt-cache show", pkg)
	}
	return d, nil
}

// download fetches the exact version into a temp dir inside the cache and
// renames it into place, so an interrupted download never leaves a
// truncated .deb under the cache key.
func download(d Deb, cacheDir string) error {
	tmp, err := os.MkdirTemp(cacheDir, ".download-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("apt-get", "download", d.String())
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", d, err, out)
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil || len(got) != 1 {
		return fmt.Errorf("apt-get download %s: want one .deb, got %v", d, got)
	}
	return os.Rename(got[0], d.File)
}

// Extract unpacks every package into root (dpkg-deb -x: the data only, no
// maintainer scripts run).
func Extract(root string, debs []Deb) error {
	for _, d := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", d.File, root).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v\n%s", d.File, err, out)
		}
	}
	return nil
}

// libDirs are where Debian puts shared libraries (multiarch), searched in
// the extracted tree the way ld.so searches them on a real system.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"}

// ELFClosure returns, for the executables at bins (paths inside root), the
// image paths of everything they need to run: their ELF interpreter and
// the transitive DT_NEEDED libraries, each found in root. A library the
// packages do not provide is an error naming it and who needs it, so the
// package list cannot silently fall short.
func ELFClosure(root string, bins []string) ([]string, error) {
	need := map[string]bool{}
	queue := append([]string(nil), bins...)
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		real, err := resolveIn(root, p)
		if err != nil {
			return nil, err
		}
		f, err := elf.Open(real)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		libs, err := f.ImportedLibraries()
		interp := ""
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b := make([]byte, prog.Filesz)
				if _, rerr := prog.ReadAt(b, 0); rerr == nil {
					interp = string(bytes.TrimRight(b, "\x00"))
				}
			}
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		if interp != "" {
			if _, err := resolveIn(root, interp); err != nil {
				return nil, fmt.Errorf("%s needs interpreter %s, which no package provides", p, interp)
			}
			need[interp] = true
		}
		for _, lib := range libs {
			found := ""
			for _, d := range libDirs {
				if _, err := resolveIn(root, filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return nil, fmt.Errorf("%s needs %s, which none of the packages provides: add its package", p, lib)
			}
			need[found] = true
			queue = append(queue, found)
		}
	}
	out := make([]string, 0, len(need))
	for p := range need {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// RootFiles turns paths inside root into image Files. Symbolic links are
// followed inside root, so a soname link becomes the library itself and
// the image holds one copy at the path the loader asks for.
func RootFiles(root string, paths []string, mode int64) ([]File, error) {
	out := make([]File, 0, len(paths))
	for _, p := range paths {
		real, err := resolveIn(root, p)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: p, Mode: mode, Src: real})
	}
	return out, nil
}

// resolveIn follows symbolic links of p as if root were /, so an absolute
// link in a package (/lib64/ld-linux-x86-64.so.2 -> /lib/...) leads to the
// package's file and never to the build machine's own.
func resolveIn(root, p string) (string, error) {
	cur := filepath.Clean("/" + p)
	for hops := 0; hops < 40; hops++ {
		// Resolve the parent first so a linked directory is followed too.
		dir, base := filepath.Split(cur)
		if dir != "/" {
			rd, err := resolveIn(root, dir)
			if err != nil {
				return "", err
			}
			dir = strings.TrimPrefix(rd, root)
		}
		cur = filepath.Join("/", dir, base)
		full := filepath.Join(root, cur)
		fi, err := os.Lstat(full)
		if err != nil {
			return "", fmt.Errorf("%s: not in the packages: %w", p, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return full, nil
		}
		target, err := os.Readlink(full)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(cur), target)
		}
		cur = filepath.Clean(target)
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// CABundle concatenates every .crt under dir, in path order: the bundle
// Debian's update-ca-certificates would write to
// /etc/ssl/certs/ca-certificates.crt with every certificate enabled.
func CABundle(dir string) ([]byte, error) {
	var crts []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			crts = append(crts, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(crts) == 0 {
		return nil, fmt.Errorf("no certificates under %s", dir)
	}
	sort.Strings(crts)
	var b bytes.Buffer
	for _, p := range crts {
		c, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		b.Write(bytes.TrimRight(c, "\n"))
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}
