package manifests

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"
)

// The committed switchyard.yml is what Render gives today (make verify
// checks the same with a diff; this names the fix).
func TestRenderedIsCurrent(t *testing.T) {
	want, err := Render(Version())
	if err != nil {
		t.Fatal(err)
	}
	got, err := fs.ReadFile(Files, "switchyard.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifests/switchyard.yml is stale: run `make manifests` and commit")
	}
}

// Every part names the images at VERSION, so a part applied alone and the
// rendered file agree, and a version bump is one file.
func TestPartsNameVersion(t *testing.T) {
	parts, err := fs.Glob(Files, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range parts {
		data, _ := fs.ReadFile(Files, p)
		for _, ref := range ImageTags(data) {
			name, tag, _ := strings.Cut(ref, ":")
			seen[name] = true
			if tag != Version() {
				t.Errorf("%s names %s, want tag %s (manifests/VERSION)", p, ref, Version())
			}
		}
	}
	for _, name := range []string{"switchyard/switchyard-agent", "switchyard/switchyard-controller", "switchyard/switchyard-ovs", "switchyard/switchyard-plugin-template"} {
		if !seen[name] {
			t.Errorf("no manifest names %s", name)
		}
	}
}

func TestRenderVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"0.2.0", true},
		{"a6d5268-dirty", true},
		{"", false},
		{"1.0+build", false},
		{"has space", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			out, err := Render(tc.version)
			if (err == nil) != tc.ok {
				t.Fatalf("Render(%q) err = %v, want ok=%v", tc.version, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			tags := ImageTags(out)
			if len(tags) < 3 {
				t.Fatalf("rendered manifest names only %v", tags)
			}
			for _, ref := range tags {
				if !strings.HasSuffix(ref, ":"+tc.version) {
					t.Errorf("rendered %s, want tag %s", ref, tc.version)
				}
			}
		})
	}
}
