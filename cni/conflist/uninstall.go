package conflist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// InstalledList is the file in BinDir naming the binaries Switchyard put
// there besides its own: reference plugins (portmap, bandwidth) it copied
// because the node had none. Uninstall removes exactly those, never a copy
// that was there before Switchyard came.
const InstalledList = ".switchyard-installed"

// InstallChained copies each chained plugin the conflist names (portmap,
// bandwidth, as o enables them) from dir into BinDir where BinDir lacks
// it, and records what it copied in InstalledList.
func InstallChained(dir string, o Options) ([]string, error) {
	o.defaults()
	var want []string
	if o.PortMap {
		want = append(want, "portmap")
	}
	if o.Bandwidth {
		want = append(want, "bandwidth")
	}
	recorded, err := readInstalled(o.BinDir)
	if err != nil {
		return nil, err
	}
	var copied []string
	for _, b := range want {
		dst := filepath.Join(o.BinDir, b)
		// One we installed earlier is ours to refresh; anyone else's stays.
		if _, err := os.Stat(dst); err == nil && !slices.Contains(recorded, b) {
			continue
		}
		if err := installBinary(filepath.Join(dir, b), dst); err != nil {
			return nil, err
		}
		copied = append(copied, b)
	}
	all := append(recorded, copied...)
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) > 0 {
		data := []byte(strings.Join(all, "\n") + "\n")
		if err := atomicWrite(filepath.Join(o.BinDir, InstalledList), 0o644, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return nil, err
		}
	}
	return copied, nil
}

func readInstalled(binDir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(binDir, InstalledList))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		// Names only: a list that names a path is not ours to follow.
		if l = strings.TrimSpace(l); l != "" && !strings.ContainsRune(l, '/') {
			out = append(out, l)
		}
	}
	return out, nil
}

// Uninstall removes the conflist first (so the runtime stops calling
// Switchyard), then the switchyard-cni binary and the binaries recorded in
// InstalledList, and returns the paths it removed. Missing files are fine:
// running it twice is harmless.
func Uninstall(o Options) ([]string, error) {
	o.defaults()
	recorded, err := readInstalled(o.BinDir)
	if err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(o.ConfDir, o.FileName), filepath.Join(o.BinDir, o.BinaryName)}
	for _, b := range recorded {
		paths = append(paths, filepath.Join(o.BinDir, b))
	}
	paths = append(paths, filepath.Join(o.BinDir, InstalledList))
	var removed []string
	var errs []error
	for _, p := range paths {
		switch err := os.Remove(p); {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, os.ErrNotExist):
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return removed, errors.Join(errs...)
}
