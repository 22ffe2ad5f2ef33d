package client

import (
	"net/netip"
	"strings"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
)

// MemberKey identifies a group member across patches: the pod's
// namespace/name, or its addresses for a member without a name.
type MemberKey string

// KeyOf returns the member's key.
func KeyOf(m *apiv1.Member) MemberKey {
	if m.Name != "" {
		return MemberKey(m.Namespace + "/" + m.Name)
	}
	var b strings.Builder
	for i, ip := range m.Ips {
		if i > 0 {
			b.WriteByte(',')
		}
		a, _ := netip.AddrFromSlice(ip)
		b.WriteString(a.String())
	}
	return MemberKey(b.String())
}

// Group is an AppliedToGroup or AddressGroup as the node holds it.
type Group struct {
	ID      uint32
	Members map[MemberKey]*apiv1.Member
}

func newGroup(id uint32, ms []*apiv1.Member) *Group {
	g := &Group{ID: id, Members: make(map[MemberKey]*apiv1.Member, len(ms))}
	for _, m := range ms {
		g.Members[KeyOf(m)] = m
	}
	return g
}

// State is one node's span: its policies and the groups they use.
// Consumers must treat it as read-only.
type State struct {
	Policies        map[string]*apiv1.Policy
	AppliedToGroups map[uint32]*Group
	AddressGroups   map[uint32]*Group
	// Epoch and Version are those of the last event applied.
	Epoch   string
	Version uint64
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Policies: map[string]*apiv1.Policy{}, AppliedToGroups: map[uint32]*Group{}, AddressGroups: map[uint32]*Group{}}
}

// ChangeKind says what one incremental change did.
type ChangeKind uint8

const (
	PolicyUpserted ChangeKind = iota + 1
	PolicyDeleted
	AppliedToGroupUpserted
	AppliedToGroupPatched
	AppliedToGroupDeleted
	AddressGroupUpserted
	AddressGroupPatched
	AddressGroupDeleted
)

var changeNames = [...]string{"", "policy-upsert", "policy-delete", "atg-upsert", "atg-patch", "atg-delete", "ag-upsert", "ag-patch", "ag-delete"}

func (k ChangeKind) String() string {
	if int(k) < len(changeNames) {
		return changeNames[k]
	}
	return "unknown"
}

// Change is one incremental event, already applied to the State that comes
// with it. For a delete, Old holds what was removed; for a policy upsert,
// Old holds the previous version (nil if it is new).
type Change struct {
	Kind ChangeKind
	// Policy is the upserted policy (PolicyUpserted), OldPolicy what it
	// replaced or what was deleted.
	Policy, OldPolicy *apiv1.Policy
	// GroupID is the group concerned (group kinds).
	GroupID uint32
	// Added and Removed are the members a patch or upsert added and removed
	// (for an upsert of a known group: the difference to the old members;
	// for a delete: every member it had).
	Added, Removed []*apiv1.Member
}

// apply applies one incremental event (not Reset, Resumed or Synced) and
// returns the change it made. ok is false for an event that changes
// nothing the node knows (a patch for a group it does not hold).
func (s *State) apply(ev *apiv1.WatchEvent) (c Change, ok bool) {
	switch x := ev.Event.(type) {
	case *apiv1.WatchEvent_PolicyUpsert:
		p := x.PolicyUpsert
		c = Change{Kind: PolicyUpserted, Policy: p, OldPolicy: s.Policies[p.Uid]}
		s.Policies[p.Uid] = p
	case *apiv1.WatchEvent_PolicyDelete:
		old, had := s.Policies[x.PolicyDelete]
		if !had {
			return c, false
		}
		delete(s.Policies, x.PolicyDelete)
		c = Change{Kind: PolicyDeleted, OldPolicy: old}
	case *apiv1.WatchEvent_AppliedToGroupUpsert:
		c = upsertGroup(s.AppliedToGroups, x.AppliedToGroupUpsert, AppliedToGroupUpserted)
	case *apiv1.WatchEvent_AppliedToGroupPatch:
		return patchGroup(s.AppliedToGroups, x.AppliedToGroupPatch, AppliedToGroupPatched)
	case *apiv1.WatchEvent_AppliedToGroupDelete:
		return deleteGroup(s.AppliedToGroups, x.AppliedToGroupDelete, AppliedToGroupDeleted)
	case *apiv1.WatchEvent_AddressGroupUpsert:
		c = upsertGroup(s.AddressGroups, x.AddressGroupUpsert, AddressGroupUpserted)
	case *apiv1.WatchEvent_AddressGroupPatch:
		return patchGroup(s.AddressGroups, x.AddressGroupPatch, AddressGroupPatched)
	case *apiv1.WatchEvent_AddressGroupDelete:
		return deleteGroup(s.AddressGroups, x.AddressGroupDelete, AddressGroupDeleted)
	default:
		return c, false
	}
	return c, true
}

func upsertGroup(groups map[uint32]*Group, pg *apiv1.Group, kind ChangeKind) Change {
	ng := newGroup(pg.Id, pg.Members)
	c := Change{Kind: kind, GroupID: pg.Id}
	old := groups[pg.Id]
	for k, m := range ng.Members {
		if old == nil || old.Members[k] == nil {
			c.Added = append(c.Added, m)
		}
	}
	if old != nil {
		for k, m := range old.Members {
			if ng.Members[k] == nil {
				c.Removed = append(c.Removed, m)
			}
		}
	}
	groups[pg.Id] = ng
	return c
}

func patchGroup(groups map[uint32]*Group, p *apiv1.GroupPatch, kind ChangeKind) (Change, bool) {
	g := groups[p.Id]
	if g == nil {
		return Change{}, false
	}
	c := Change{Kind: kind, GroupID: p.Id}
	for _, m := range p.Removed {
		k := KeyOf(m)
		if old := g.Members[k]; old != nil {
			delete(g.Members, k)
			c.Removed = append(c.Removed, old)
		}
	}
	for _, m := range p.Added {
		g.Members[KeyOf(m)] = m
		c.Added = append(c.Added, m)
	}
	return c, true
}

func deleteGroup(groups map[uint32]*Group, id uint32, kind ChangeKind) (Change, bool) {
	g := groups[id]
	if g == nil {
		return Change{}, false
	}
	delete(groups, id)
	c := Change{Kind: kind, GroupID: id}
	for _, m := range g.Members {
		c.Removed = append(c.Removed, m)
	}
	return c, true
}

// Members returns the members of the groups ids in tbl, deduplicated.
func Members(tbl map[uint32]*Group, ids []uint32) []*apiv1.Member {
	seen := map[MemberKey]bool{}
	var out []*apiv1.Member
	for _, id := range ids {
		g := tbl[id]
		if g == nil {
			continue
		}
		for k, m := range g.Members {
			if !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
	}
	return out
}
