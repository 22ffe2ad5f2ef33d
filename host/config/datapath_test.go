package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDetectDatapath(t *testing.T) {
	const rel = "6.1.0-test"
	cases := []struct {
		name   string
		loaded bool
		dep    string // modules.dep content; "" = no file
		want   string
	}{
		{"module loaded", true, "", DatapathSystem},
		{"module built for this kernel", false, "kernel/net/openvswitch/openvswitch.ko.xz: kernel/net/nsh/nsh.ko.xz\n", DatapathSystem},
		{"uncompressed module", false, "kernel/net/openvswitch/openvswitch.ko:\n", DatapathSystem},
		{"only the vport modules' names look alike", false, "kernel/net/openvswitch/vport-openvswitchx.ko:\nkernel/net/bridge/bridge.ko:\n", DatapathNetdev},
		{"no modules.dep", false, "", DatapathNetdev},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			h := Host{SysRoot: filepath.Join(root, "sys"), ModulesRoot: filepath.Join(root, "lib", "modules"), Release: rel}
			if tc.loaded {
				if err := os.MkdirAll(filepath.Join(h.SysRoot, "module", "openvswitch"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.dep != "" {
				dir := filepath.Join(h.ModulesRoot, rel)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(tc.dep), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := DetectDatapath(h); got != tc.want {
				t.Errorf("DetectDatapath = %q, want %q", got, tc.want)
			}
		})
	}
	// This machine has no OVS kernel module: the tests' bridges are netdev.
	t.Logf("this host: %s", DetectDatapath(ThisHost()))
}
