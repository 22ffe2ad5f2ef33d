package distribute

import (
	"fmt"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/compute"
)

func toMembers(ms []compute.Member) []*apiv1.Member {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*apiv1.Member, len(ms))
	for i, m := range ms {
		pm := &apiv1.Member{Namespace: m.Namespace, Name: m.Name, Node: m.Node}
		for _, ip := range m.IPs {
			pm.Ips = append(pm.Ips, ip.AsSlice())
		}
		for _, p := range m.Ports {
			pm.Ports = append(pm.Ports, &apiv1.NamedPort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port})
		}
		out[i] = pm
	}
	return out
}

func toGroupIDs(ids []compute.GroupID) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

func toPolicy(p *compute.Policy) *apiv1.Policy {
	out := &apiv1.Policy{
		Uid: p.UID, SourceKind: p.Source.String(), Namespace: p.Namespace, Name: p.Name, Generation: p.Generation,
		TierPriority: p.TierPriority, Priority: p.Priority, IsolateIngress: p.IsolateIngress, IsolateEgress: p.IsolateEgress,
		AppliedToGroups: toGroupIDs(p.AppliedToGroups),
	}
	for _, r := range p.Rules {
		pr := &apiv1.Rule{
			Name: r.Name, Direction: apiv1.Direction(r.Direction), Action: apiv1.Action(r.Action), Priority: r.Priority,
			AnyPeer: r.AnyPeer, AddressGroups: toGroupIDs(r.AddressGroups), AppliedToGroups: toGroupIDs(r.AppliedToGroups), Logging: r.Logging,
		}
		for _, b := range r.IPBlocks {
			pb := &apiv1.IPBlock{Cidr: b.CIDR.String()}
			for _, x := range b.Except {
				pb.Except = append(pb.Except, x.String())
			}
			pr.IpBlocks = append(pr.IpBlocks, pb)
		}
		for _, port := range r.Ports {
			pr.Ports = append(pr.Ports, &apiv1.Port{Protocol: string(port.Protocol), Port: port.Port, EndPort: port.EndPort, Name: port.Name})
		}
		out.Rules = append(out.Rules, pr)
	}
	return out
}

// toEvent converts an engine event; the version and epoch are stamped by the hub.
func toEvent(ev compute.Event, policyCache func(*compute.Policy) *apiv1.Policy) *apiv1.WatchEvent {
	w := &apiv1.WatchEvent{}
	id := uint32(ev.Group)
	patch := func() *apiv1.GroupPatch {
		return &apiv1.GroupPatch{Id: id, Added: toMembers(ev.Added), Removed: toMembers(ev.Removed)}
	}
	switch ev.Type {
	case compute.PolicyUpsert:
		w.Event = &apiv1.WatchEvent_PolicyUpsert{PolicyUpsert: policyCache(ev.Policy)}
	case compute.PolicyDelete:
		w.Event = &apiv1.WatchEvent_PolicyDelete{PolicyDelete: ev.PolicyUID}
	case compute.AppliedToGroupUpsert:
		w.Event = &apiv1.WatchEvent_AppliedToGroupUpsert{AppliedToGroupUpsert: &apiv1.Group{Id: id, Members: toMembers(ev.Added)}}
	case compute.AppliedToGroupPatch:
		w.Event = &apiv1.WatchEvent_AppliedToGroupPatch{AppliedToGroupPatch: patch()}
	case compute.AppliedToGroupDelete:
		w.Event = &apiv1.WatchEvent_AppliedToGroupDelete{AppliedToGroupDelete: id}
	case compute.AddressGroupUpsert:
		w.Event = &apiv1.WatchEvent_AddressGroupUpsert{AddressGroupUpsert: &apiv1.Group{Id: id, Members: toMembers(ev.Added)}}
	case compute.AddressGroupPatch:
		w.Event = &apiv1.WatchEvent_AddressGroupPatch{AddressGroupPatch: patch()}
	case compute.AddressGroupDelete:
		w.Event = &apiv1.WatchEvent_AddressGroupDelete{AddressGroupDelete: id}
	}
	return w
}

// payloadOf and setPayload move the oneof payload between events, so one
// converted payload can be shared by the per-node events that carry it.
func payloadOf(w *apiv1.WatchEvent) any { return w.Event }

func setPayload(w *apiv1.WatchEvent, p any) {
	switch x := p.(type) {
	case *apiv1.WatchEvent_PolicyUpsert:
		w.Event = x
	case *apiv1.WatchEvent_AppliedToGroupUpsert:
		w.Event = x
	case *apiv1.WatchEvent_AppliedToGroupPatch:
		w.Event = x
	case *apiv1.WatchEvent_AddressGroupUpsert:
		w.Event = x
	case *apiv1.WatchEvent_AddressGroupPatch:
		w.Event = x
	default:
		panic(fmt.Sprintf("setPayload: unexpected payload %T", p))
	}
}
