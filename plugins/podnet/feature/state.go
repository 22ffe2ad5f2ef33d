package feature

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// podRecord is what podnet must remember about an attached pod to remove
// or re-install it without asking anyone.
type podRecord struct {
	ContainerID  string       `json:"containerID"`
	IfName       string       `json:"ifName"`
	HostIfName   string       `json:"hostIfName"`
	Netns        string       `json:"netns"`
	PodNamespace string       `json:"podNamespace"`
	PodName      string       `json:"podName"`
	OFPort       uint32       `json:"ofport"`
	MAC          string       `json:"mac"`
	IPs          []netip.Addr `json:"ips"`
	MTU          int          `json:"mtu"`
}

func (r podRecord) key() string { return r.ContainerID + "/" + r.IfName }

// state is a small JSON file rewritten atomically on each change.
type state struct {
	path string
	mu   sync.Mutex
	pods map[string]podRecord
}

func openState(path string) (*state, error) {
	s := &state{path: path, pods: map[string]podRecord{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err != nil {
		return nil, err
	}
	var recs []podRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("podnet state %s is corrupt (%v); move it aside and run CNI GC", path, err)
	}
	for _, r := range recs {
		s.pods[r.key()] = r
	}
	return s, nil
}

func (s *state) get(key string) (podRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.pods[key]
	return r, ok
}

func (s *state) list() []podRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sorted(s.pods)
}

func (s *state) sorted(m map[string]podRecord) []podRecord {
	out := make([]podRecord, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

func (s *state) put(r podRecord) error {
	return s.update(func(m map[string]podRecord) { m[r.key()] = r })
}

func (s *state) remove(key string) error {
	return s.update(func(m map[string]podRecord) { delete(m, key) })
}

func (s *state) update(change func(map[string]podRecord)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]podRecord, len(s.pods)+1)
	for k, v := range s.pods {
		next[k] = v
	}
	change(next)
	data, err := json.Marshal(s.sorted(next))
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("podnet state: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("podnet state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("podnet state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("podnet state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("podnet state: %w", err)
	}
	s.pods = next
	return nil
}
