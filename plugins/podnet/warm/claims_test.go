package warm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClaims(t *testing.T) {
	tests := []struct {
		name   string
		writes [][2]string // attachment, pair
		remove []string
		want   map[string]string
	}{
		{"none", nil, nil, map[string]string{}},
		{"one", [][2]string{{"sy0123456789a", "syw0011223344"}}, nil, map[string]string{"sy0123456789a": "syw0011223344"}},
		{"rewritten", [][2]string{{"sya", "syw1"}, {"sya", "syw2"}}, nil, map[string]string{"sya": "syw2"}},
		{"removed, and removing a missing one is fine", [][2]string{{"sya", "syw1"}, {"syb", "syw2"}}, []string{"sya", "syc"}, map[string]string{"syb": "syw2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Claims{Dir: filepath.Join(t.TempDir(), "claims")}
			for _, w := range tc.writes {
				if err := c.Write(w[0], w[1]); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.remove {
				if err := c.Remove(r); err != nil {
					t.Fatal(err)
				}
			}
			got, err := c.All()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			for att, pair := range tc.want {
				if got, err := c.Read(att); err != nil || got != pair {
					t.Errorf("Read(%s) = %q, %v; want %q", att, got, err, pair)
				}
			}
			if got, err := c.Read("never"); err != nil || got != "" {
				t.Errorf("Read of an attachment without a claim = %q, %v; want nothing", got, err)
			}
			if ents, _ := os.ReadDir(c.Dir); len(ents) != len(tc.want) {
				t.Errorf("claims dir holds %d files, want %d (a temp file left behind?)", len(ents), len(tc.want))
			}
		})
	}
}
