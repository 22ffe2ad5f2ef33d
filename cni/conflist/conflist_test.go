package conflist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/google/go-cmp/cmp"
)

func fakeBin(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInstallThenWrite(t *testing.T) {
	src := fakeBin(t, t.TempDir(), "switchyard-cni")
	binDir, confDir := t.TempDir(), filepath.Join(t.TempDir(), "net.d")
	fakeBin(t, binDir, "portmap")
	fakeBin(t, binDir, "bandwidth")
	path, err := Install(src, Options{ConfDir: confDir, BinDir: binDir, Socket: "/run/sy/cni.sock", MTU: 1450, PortMap: true, Bandwidth: true})
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(binDir, "switchyard-cni")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("binary not installed executable: %v", err)
	}
	// The runtime's own loader must accept it and see the chain in order.
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatalf("libcni rejects the conflist: %v", err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	if diff := cmp.Diff([]string{"switchyard-cni", "portmap", "bandwidth"}, types); diff != "" {
		t.Errorf("plugin chain (-want +got):\n%s", diff)
	}
	if !list.Plugins[1].Network.Capabilities["portMappings"] || !list.Plugins[2].Network.Capabilities["bandwidth"] {
		t.Errorf("chained plugins lost their capabilities: %s", list.Bytes)
	}
	if !strings.Contains(string(list.Plugins[0].Bytes), `"/run/sy/cni.sock"`) {
		t.Errorf("socket not in switchyard entry: %s", list.Plugins[0].Bytes)
	}
	// No temp files are left beside the result.
	entries, _ := os.ReadDir(confDir)
	if len(entries) != 1 {
		t.Errorf("conf dir holds %d entries, want just the conflist", len(entries))
	}
}

func TestWriteRefusesWithoutBinary(t *testing.T) {
	binDir, confDir := t.TempDir(), t.TempDir()
	tests := []struct {
		name    string
		setup   func()
		opts    Options
		wantErr string
	}{
		{"no binary", func() {}, Options{}, "switchyard-cni is not installed"},
		{"portmap missing", func() { fakeBin(t, binDir, "switchyard-cni") }, Options{PortMap: true}, "portmap is not installed"},
		{"not executable", func() { os.WriteFile(filepath.Join(binDir, "bandwidth"), nil, 0o644) }, Options{Bandwidth: true}, "not an executable"},
		{"bad socket", func() {}, Options{Socket: "relative.sock"}, "absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			tc.opts.BinDir, tc.opts.ConfDir = binDir, confDir
			_, err := Write(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
			if entries, _ := os.ReadDir(confDir); len(entries) != 0 {
				t.Errorf("a refused write left %d files in the conf dir", len(entries))
			}
		})
	}
}
