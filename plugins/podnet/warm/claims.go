package warm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Claims record which warm pair each pod attachment took: its host end's
// name no longer follows from the attachment, and DEL, CHECK, GC and a
// restart must still find it. One file per attachment, named by the
// attachment's derived name, holding the pair's name. A claim is written
// before the pair leaves the pool, so no crash can leave a pair in a pod
// that nothing points to.
type Claims struct{ Dir string }

// Write records that attachment took pair; it replaces the file whole,
// so a reader never sees half a name.
func (c Claims) Write(attachment, pair string) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("warm port claims dir: %w", err)
	}
	tmp := filepath.Join(c.Dir, "."+attachment+".tmp")
	if err := os.WriteFile(tmp, []byte(pair+"\n"), 0o644); err != nil {
		return fmt.Errorf("recording that %s took warm port %s: %w", attachment, pair, err)
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, attachment)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("recording that %s took warm port %s: %w", attachment, pair, err)
	}
	return nil
}

// Read returns the pair attachment took, or "" when it took none.
func (c Claims) Read(attachment string) (string, error) {
	data, err := os.ReadFile(filepath.Join(c.Dir, attachment))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the warm port claim of %s: %w", attachment, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// Remove forgets attachment's claim; a missing claim is not an error.
func (c Claims) Remove(attachment string) error {
	err := os.Remove(filepath.Join(c.Dir, attachment))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the warm port claim of %s: %w", attachment, err)
	}
	return nil
}

// All maps each attachment with a claim to its pair.
func (c Claims) All() (map[string]string, error) {
	ents, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("warm port claims dir: %w", err)
	}
	out := make(map[string]string, len(ents))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		pair, err := c.Read(e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = pair
	}
	return out, nil
}
