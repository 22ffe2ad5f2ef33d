package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protodelim"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
)

// Save writes s to path atomically (temp file, fsync, rename), as the
// stream would deliver it: Reset, the span as upserts, Synced, each
// stamped with s's epoch and version.
func (s *State) Save(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".policy-state-*")
	if err != nil {
		return fmt.Errorf("saving policy state: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	for _, ev := range s.events() {
		if _, err := marshalDelimited(w, ev); err != nil {
			tmp.Close()
			return fmt.Errorf("saving policy state: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving policy state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving policy state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving policy state: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

func (s *State) events() []*apiv1.WatchEvent {
	evs := []*apiv1.WatchEvent{{Event: &apiv1.WatchEvent_Reset_{Reset_: &apiv1.Reset{Reason: "saved state"}}}}
	group := func(g *Group) *apiv1.Group {
		pg := &apiv1.Group{Id: g.ID}
		for _, m := range g.Members {
			pg.Members = append(pg.Members, m)
		}
		return pg
	}
	for _, g := range s.AppliedToGroups {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AppliedToGroupUpsert{AppliedToGroupUpsert: group(g)}})
	}
	for _, g := range s.AddressGroups {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AddressGroupUpsert{AddressGroupUpsert: group(g)}})
	}
	for _, p := range s.Policies {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_PolicyUpsert{PolicyUpsert: p}})
	}
	evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_Synced{Synced: &apiv1.Synced{}}})
	for _, ev := range evs {
		ev.Epoch, ev.Version = s.Epoch, s.Version
	}
	return evs
}

// ErrNoState is returned by Load when nothing was saved yet.
var ErrNoState = errors.New("no saved policy state")

// Load reads a state written by Save. A file that is cut short or
// malformed is an error (the caller starts empty and resnapshots); a
// missing file is ErrNoState.
func Load(path string) (*State, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, fmt.Errorf("loading policy state: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var s *State
	for i := 0; ; i++ {
		ev := &apiv1.WatchEvent{}
		err := protodelim.UnmarshalFrom(r, ev)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("loading policy state %s: cut short after %d events (no Synced marker)", path, i)
		}
		if err != nil {
			return nil, fmt.Errorf("loading policy state %s: event %d: %w", path, i, err)
		}
		switch ev.Event.(type) {
		case *apiv1.WatchEvent_Reset_:
			if s != nil {
				return nil, fmt.Errorf("loading policy state %s: second Reset at event %d", path, i)
			}
			s = NewState()
			continue
		case *apiv1.WatchEvent_Synced:
			if s == nil {
				return nil, fmt.Errorf("loading policy state %s: Synced before Reset", path)
			}
			s.Epoch, s.Version = ev.Epoch, ev.Version
			return s, nil
		}
		if s == nil {
			return nil, fmt.Errorf("loading policy state %s: event %d before Reset", path, i)
		}
		s.apply(ev)
	}
}

func marshalDelimited(w io.Writer, ev *apiv1.WatchEvent) (int, error) {
	return protodelim.MarshalTo(w, ev)
}
