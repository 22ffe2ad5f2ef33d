package ifstore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Interface is one pod interface attached to br-int.
type Interface struct {
	PodNamespace string `json:"podNamespace"`
	PodName      string `json:"podName"`
	PodUID       string `json:"podUID,omitempty"`
	ContainerID  string `json:"containerID"`
	// IfName is the name inside the pod, HostIfName the host end, which is
	// also the OVS port name.
	IfName     string       `json:"ifName"`
	HostIfName string       `json:"hostIfName"`
	Netns      string       `json:"netns,omitempty"`
	OFPort     uint32       `json:"ofport"`
	MAC        string       `json:"mac"`
	IPs        []netip.Addr `json:"ips"`
	Created    time.Time    `json:"created"`
}

// Key identifies an attachment the way CNI does: container ID plus the
// interface name inside the container.
type Key struct {
	ContainerID string
	IfName      string
}

func (k Key) String() string { return k.ContainerID + "/" + k.IfName }

// Key returns the attachment key of i.
func (i Interface) Key() Key { return Key{i.ContainerID, i.IfName} }

// Pod returns "namespace/name" for logs.
func (i Interface) Pod() string { return i.PodNamespace + "/" + i.PodName }

func (i Interface) validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"containerID", i.ContainerID}, {"ifName", i.IfName}, {"hostIfName", i.HostIfName},
		{"podNamespace", i.PodNamespace}, {"podName", i.PodName},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("interface record %s lacks %s", i.Key(), strings.Join(missing, ", "))
	}
	return nil
}

// EventKind says what happened to an interface.
type EventKind uint8

const (
	Added EventKind = iota + 1
	Deleted
)

func (k EventKind) String() string {
	switch k {
	case Added:
		return "added"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one change, delivered to subscribers in the order it happened.
type Event struct {
	Kind      EventKind
	Interface Interface
}

// fileFormat is the on-disk shape; Version lets a later agent migrate.
type fileFormat struct {
	Version    int         `json:"version"`
	Interfaces []Interface `json:"interfaces"`
}

const fileVersion = 1

// Store is safe for concurrent use.
type Store struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex
	items map[Key]Interface
	subs  map[*subscriber]struct{}
}

// Open loads the store at path, creating an empty one if the file does not
// exist. A file that cannot be parsed is an error rather than silently
// emptied: losing it would orphan every pod's port and addresses.
func Open(path string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Store{path: path, log: log.With("component", "ifstore"), items: map[Key]Interface{}, subs: map[*subscriber]struct{}{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("interface store: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("interface store: %w", err)
	}
	var f fileFormat
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("interface store %s is corrupt (%v); move it aside to start empty, then run CNI GC so stale pods are cleaned up", path, err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("interface store %s has version %d, this agent reads version %d", path, f.Version, fileVersion)
	}
	for _, i := range f.Interfaces {
		if err := i.validate(); err != nil {
			return nil, fmt.Errorf("interface store %s: %w", path, err)
		}
		s.items[i.Key()] = i
	}
	s.log.Info("interface store loaded", "path", path, "interfaces", len(s.items))
	return s, nil
}

// persist writes the whole store; callers hold mu. The file is small (one
// record per pod), so rewriting it beats the complexity of a log.
//
// The rename makes the new content replace the old at once for any reader
// and across a crash of the agent. There is no fsync: the store lives in
// the run directory (/var/run, a tmpfs on a node), so it does not outlive
// a reboot, and neither do the pods it records; a sync bought nothing there
// and took 0.5-2 ms of every CNI ADD and DEL on a disk.
func (s *Store) persist(items map[Key]Interface) error {
	f := fileFormat{Version: fileVersion, Interfaces: sortedValues(items)}
	// Compact: indenting took as long as the encoding itself.
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), "."+filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("interface store: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("interface store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("interface store: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("interface store: %w", err)
	}
	return nil
}

func sortedValues(items map[Key]Interface) []Interface {
	out := make([]Interface, 0, len(items))
	for _, i := range items {
		out = append(out, i)
	}
	// By container, then interface: Key's order, without building its
	// string for every comparison.
	slices.SortFunc(out, func(a, b Interface) int {
		return cmp.Or(strings.Compare(a.ContainerID, b.ContainerID), strings.Compare(a.IfName, b.IfName))
	})
	return out
}

// Put records i (replacing any record with the same key), persists, and
// tells subscribers. When Put fails nothing changed, on disk or in memory.
func (s *Store) Put(i Interface) error {
	if err := i.validate(); err != nil {
		return err
	}
	if i.Created.IsZero() {
		i.Created = time.Now().UTC()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := cloneMap(s.items)
	next[i.Key()] = i
	if err := s.persist(next); err != nil {
		return err
	}
	s.items = next
	s.publish(Event{Kind: Added, Interface: i})
	s.log.Info("pod interface recorded", "pod", i.Pod(), "container", i.ContainerID, "port", i.HostIfName, "ofport", i.OFPort, "ips", i.IPs)
	return nil
}

// Delete removes the record for k. Removing a missing record is not an
// error (DEL is idempotent); the returned bool says whether one existed.
func (s *Store) Delete(k Key) (Interface, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.items[k]
	if !ok {
		return Interface{}, false, nil
	}
	next := cloneMap(s.items)
	delete(next, k)
	if err := s.persist(next); err != nil {
		return Interface{}, false, err
	}
	s.items = next
	s.publish(Event{Kind: Deleted, Interface: old})
	s.log.Info("pod interface removed", "pod", old.Pod(), "container", old.ContainerID, "port", old.HostIfName)
	return old, true, nil
}

// Get returns the record for k.
func (s *Store) Get(k Key) (Interface, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.items[k]
	return i, ok
}

// List returns every record, sorted by key.
func (s *Store) List() []Interface {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.items)
}

func cloneMap(m map[Key]Interface) map[Key]Interface {
	out := make(map[Key]Interface, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
