package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSourceDirOutsideTheCheckout: from a directory with no itest/tools
// above it (another module's tests), SourceDir falls back to the module
// directory `go list -m` resolves.
func TestSourceDirOutsideTheCheckout(t *testing.T) {
	root, err := ModuleDir() // resolved from this module, before moving out
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "itest", "testenv", "testenv.go")); err != nil {
		t.Fatalf("ModuleDir %s does not hold this package: %v", root, err)
	}
	t.Chdir(t.TempDir())
	got, err := SourceDir("kit")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "itest", "kit"); got != want {
		t.Errorf("SourceDir(kit) outside the checkout = %s, want %s", got, want)
	}
}
