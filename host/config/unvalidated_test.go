package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadUnvalidated: a config naming plugin binaries that are not on this
// filesystem (switchyard-ovs reads the agent's ConfigMap in the OVS image)
// is refused by Load but read by LoadUnvalidated, keys intact.
func TestLoadUnvalidated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	body := "bridge:\n  name: br-test\n  datapathType: netdev\nplugins:\n  - name: podnet\n    path: /nonexistent/podnet\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil); err == nil {
		t.Fatal("Load accepted a plugin path that does not exist")
	}
	c, err := LoadUnvalidated(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge.Name != "br-test" || c.Bridge.DatapathType != DatapathNetdev {
		t.Errorf("bridge %q datapath %q, want br-test netdev", c.Bridge.Name, c.Bridge.DatapathType)
	}
}
