package kube

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
)

// ErrNoPodCIDR: the Node has no pod CIDR yet.
var ErrNoPodCIDR = errors.New("no pod CIDR")

// ErrBadFacts: the Node's facts cannot be used (they contradict each other).
var ErrBadFacts = errors.New("unusable node facts")

// Observed is what a Node object says about its node.
type Observed struct {
	PodCIDRs    []netip.Prefix
	InternalIPs []netip.Addr
	ExternalIPs []netip.Addr
}

// Observe reads a Node: spec.podCIDRs (spec.podCIDR on old clusters) and
// status.addresses. An unparsable value is an error naming its field.
func Observe(n *corev1.Node) (Observed, error) {
	var o Observed
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return o, fmt.Errorf("%w: Node %s spec.podCIDRs[%d] %q is not a CIDR", ErrBadFacts, n.Name, i, s)
		}
		o.PodCIDRs = append(o.PodCIDRs, p.Masked())
	}
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		switch a.Type {
		case corev1.NodeInternalIP:
			if err != nil {
				return o, fmt.Errorf("%w: Node %s InternalIP %q is not an IP address", ErrBadFacts, n.Name, a.Address)
			}
			o.InternalIPs = append(o.InternalIPs, ip)
		case corev1.NodeExternalIP:
			if err != nil {
				return o, fmt.Errorf("%w: Node %s ExternalIP %q is not an IP address", ErrBadFacts, n.Name, a.Address)
			}
			o.ExternalIPs = append(o.ExternalIPs, ip)
		}
	}
	return o, nil
}

// Info is what node events carry about another node. Values that do not
// parse are left out: another node's bad field is that node's problem.
func Info(n *corev1.Node) sdk.NodeInfo {
	info := sdk.NodeInfo{Name: n.Name}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil {
			info.PodCIDRs = append(info.PodCIDRs, p.Masked())
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			info.NodeIPs = append(info.NodeIPs, ip)
		}
	}
	return info
}

// SameInfo reports whether two node infos are equal.
func SameInfo(a, b sdk.NodeInfo) bool {
	return a.Name == b.Name && slices.Equal(a.NodeIPs, b.NodeIPs) && slices.Equal(a.PodCIDRs, b.PodCIDRs)
}

// UplinkFunc finds the interface holding ip and its MTU.
type UplinkFunc func(ip netip.Addr) (name string, mtu int, err error)

// Uplink finds the interface holding ip in the agent's network namespace.
func Uplink(ip netip.Addr) (string, int, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", 0, err
	}
	for _, a := range addrs {
		if a.IP.Equal(net.IP(ip.AsSlice())) {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", 0, err
			}
			return l.Attrs().Name, l.Attrs().MTU, nil
		}
	}
	return "", 0, fmt.Errorf("no interface holds the node IP %s", ip)
}

// defaultMTU is used when neither the config nor the uplink says.
const defaultMTU = 1500

// Facts merges what the Node says (obs) with the agent's explicit
// overrides (ov, from the config) into the facts plugins get, on top of
// base (name, bridge, gateway). The uplink's MTU is looked up with uplink
// unless the config sets one. warn, if not empty, is worth logging; err
// means the facts cannot be used, and says why and what to do.
func Facts(base sdk.NodeFacts, obs Observed, ov config.Node, uplink UplinkFunc) (f sdk.NodeFacts, warn string, err error) {
	f = base
	f.PodCIDRs, f.NodeIPs, f.ExternalIPs = obs.PodCIDRs, obs.InternalIPs, obs.ExternalIPs
	if len(ov.PodCIDRs) > 0 {
		f.PodCIDRs = nil
		for _, s := range ov.PodCIDRs {
			p, perr := netip.ParsePrefix(s)
			if perr != nil {
				return f, "", fmt.Errorf("%w: node.podCIDRs %q is not a CIDR", ErrBadFacts, s)
			}
			f.PodCIDRs = append(f.PodCIDRs, p.Masked())
		}
	}
	if len(ov.NodeIPs) > 0 {
		f.NodeIPs = nil
		for _, s := range ov.NodeIPs {
			ip, perr := netip.ParseAddr(s)
			if perr != nil {
				return f, "", fmt.Errorf("%w: node.nodeIPs %q is not an IP address", ErrBadFacts, s)
			}
			f.NodeIPs = append(f.NodeIPs, ip)
		}
	}
	if len(f.PodCIDRs) == 0 {
		return f, "", fmt.Errorf("%w: Node %s has no pod CIDR yet (spec.podCIDRs is empty); kube-controller-manager assigns one when it runs with --allocate-node-cidrs and a --cluster-cidr, or an operator sets it; waiting", ErrNoPodCIDR, f.Name)
	}
	for _, p := range f.PodCIDRs {
		for _, ip := range append(slices.Clone(f.NodeIPs), f.ExternalIPs...) {
			if p.Contains(ip) {
				return f, "", fmt.Errorf("%w: Node %s pod CIDR %s contains the node's own address %s; pod and node networks must not overlap: give kube-controller-manager a --cluster-cidr outside the node network and recreate the Node (or set node.podCIDRs)", ErrBadFacts, f.Name, p, ip)
			}
		}
	}
	f.MTU = ov.MTU
	if f.MTU == 0 {
		f.MTU = defaultMTU
		if len(f.NodeIPs) == 0 {
			warn = fmt.Sprintf("Node %s has no InternalIP yet; assuming MTU %d until it has one", f.Name, defaultMTU)
		} else if name, mtu, uerr := uplink(f.NodeIPs[0]); uerr != nil {
			warn = fmt.Sprintf("cannot find the uplink of node IP %s (%v); assuming MTU %d (set node.mtu to override)", f.NodeIPs[0], uerr, defaultMTU)
		} else {
			f.MTU, f.Uplink = mtu, name
		}
	} else if len(f.NodeIPs) > 0 {
		if name, _, uerr := uplink(f.NodeIPs[0]); uerr == nil {
			f.Uplink = name
		}
	}
	return f, warn, nil
}

// SameFacts reports whether two fact sets are equal.
func SameFacts(a, b sdk.NodeFacts) bool {
	return a.Name == b.Name && slices.Equal(a.PodCIDRs, b.PodCIDRs) && slices.Equal(a.NodeIPs, b.NodeIPs) &&
		slices.Equal(a.ExternalIPs, b.ExternalIPs) && a.GatewayIP == b.GatewayIP && a.GatewayMAC.String() == b.GatewayMAC.String() &&
		a.MTU == b.MTU && a.PodMTU == b.PodMTU && a.Uplink == b.Uplink && a.Bridge == b.Bridge && a.DatapathType == b.DatapathType
}
