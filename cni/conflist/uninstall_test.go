package conflist

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestInstallChainedAndUninstall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		preexist   []string // chained plugins the node already has
		wantCopied []string
		wantKept   []string // left by Uninstall
	}{
		{"bare node", nil, []string{"bandwidth", "portmap"}, nil},
		{"node has portmap", []string{"portmap"}, []string{"bandwidth"}, []string{"portmap"}},
		{"node has both", []string{"portmap", "bandwidth"}, nil, []string{"bandwidth", "portmap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, bin, conf := filepath.Join(dir, "src"), filepath.Join(dir, "bin"), filepath.Join(dir, "conf")
			for _, d := range []string{src, bin} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(p string) {
				if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range []string{"portmap", "bandwidth", "switchyard-cni"} {
				write(filepath.Join(src, b))
			}
			for _, b := range tc.preexist {
				write(filepath.Join(bin, b))
			}
			o := Options{BinDir: bin, ConfDir: conf, PortMap: true, Bandwidth: true}
			copied, err := InstallChained(src, o)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(copied)
			if !slices.Equal(copied, tc.wantCopied) {
				t.Errorf("copied %v, want %v", copied, tc.wantCopied)
			}
			// Installing again refreshes ours and still leaves theirs.
			if again, err := InstallChained(src, o); err != nil || len(again) != len(tc.wantCopied) {
				t.Errorf("second install copied %v (%v), want %v again", again, err, tc.wantCopied)
			}
			if _, err := Install(filepath.Join(src, "switchyard-cni"), o); err != nil {
				t.Fatal(err)
			}
			if _, err := Uninstall(o); err != nil {
				t.Fatal(err)
			}
			left, _ := filepath.Glob(filepath.Join(bin, "*"))
			var names []string
			for _, l := range left {
				names = append(names, filepath.Base(l))
			}
			hidden, _ := filepath.Glob(filepath.Join(bin, ".*"))
			if !slices.Equal(names, tc.wantKept) || len(hidden) > 0 {
				t.Errorf("after uninstall bin holds %v %v, want %v", names, hidden, tc.wantKept)
			}
			if _, err := os.Stat(filepath.Join(conf, DefaultFileName)); err == nil {
				t.Errorf("conflist left after uninstall")
			}
			if _, err := Uninstall(o); err != nil {
				t.Errorf("second uninstall: %v", err)
			}
		})
	}
}
