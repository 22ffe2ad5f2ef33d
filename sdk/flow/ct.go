package flow

import (
	"fmt"
	"net/netip"
	"strings"
)

// Uint128 is a 128-bit value (ct_label), Hi holding the upper 64 bits.
type Uint128 struct{ Hi, Lo uint64 }

// IsZero reports whether every bit is clear.
func (u Uint128) IsZero() bool { return u.Hi == 0 && u.Lo == 0 }

// Bytes is the big-endian form.
func (u Uint128) Bytes() []byte { return append(be(8, u.Hi), be(8, u.Lo)...) }

// Uint128From reads a big-endian 16-byte value (shorter input is
// right-aligned).
func Uint128From(b []byte) Uint128 {
	var x [16]byte
	copy(x[16-min(len(b), 16):], b)
	return Uint128{Hi: beUint(x[:8]), Lo: beUint(x[8:])}
}

// hex prints as OVS prints 128-bit values: 0x without leading zeros.
func (u Uint128) hex() string {
	if u.Hi == 0 {
		return fmt.Sprintf("%#x", u.Lo)
	}
	return fmt.Sprintf("%#x%016x", u.Hi, u.Lo)
}

// NATKind says which address a NAT rewrites.
type NATKind uint8

const (
	// NATReverse applies the NAT recorded in the connection (plain
	// "nat"): the reply direction of a connection NATed at commit.
	NATReverse NATKind = iota
	// NATSrc rewrites the source address (SNAT, masquerade).
	NATSrc
	// NATDst rewrites the destination address (DNAT, a service VIP).
	NATDst
	numNATKinds
)

// NATSelection is how the datapath picks an address and port in a range.
type NATSelection uint8

const (
	NATDefault NATSelection = iota
	NATHash                 // a hash of the connection's addresses
	NATRandom               // random
	numNATSelections
)

// NAT describes ct(nat(...)). A zero MinAddr means no address range (only
// meaningful for NATReverse); a zero MinPort means no port range; a zero
// MaxAddr/MaxPort means a single address/port.
type NAT struct {
	Kind             NATKind
	MinAddr, MaxAddr netip.Addr
	MinPort, MaxPort uint16
	// Persistent keeps the same mapping for a client across connections.
	Persistent bool
	Selection  NATSelection
}

func (n *NAT) validate() error {
	if n.Kind >= numNATKinds || n.Selection >= numNATSelections {
		return fmt.Errorf("nat: unknown kind %d or selection %d", n.Kind, n.Selection)
	}
	if n.Kind == NATReverse {
		if n.MinAddr.IsValid() || n.MinPort != 0 || n.Persistent || n.Selection != NATDefault {
			return fmt.Errorf("nat: a reverse nat takes no address, port or option; say NATSrc or NATDst")
		}
		return nil
	}
	if !n.MinAddr.IsValid() {
		return fmt.Errorf("nat(%s): needs an address", n.kindName())
	}
	if n.MaxAddr.IsValid() && (n.MaxAddr.Is4() != n.MinAddr.Is4() || n.MaxAddr.Less(n.MinAddr)) {
		return fmt.Errorf("nat(%s): address range %v-%v is not ordered within one family", n.kindName(), n.MinAddr, n.MaxAddr)
	}
	if n.MaxPort != 0 && (n.MinPort == 0 || n.MaxPort < n.MinPort) {
		return fmt.Errorf("nat(%s): port range %d-%d is not ordered", n.kindName(), n.MinPort, n.MaxPort)
	}
	return nil
}

func (n *NAT) kindName() string {
	switch n.Kind {
	case NATSrc:
		return "src"
	case NATDst:
		return "dst"
	}
	return ""
}

// text prints as ovs-ofctl does.
func (n *NAT) text() string {
	if n.Kind == NATReverse {
		return "nat"
	}
	var b strings.Builder
	b.WriteString("nat(" + n.kindName())
	if n.MinAddr.IsValid() {
		bracket := n.MinAddr.Is6() && n.MinPort != 0
		addr := func(a netip.Addr) string {
			if bracket {
				return "[" + a.String() + "]"
			}
			return a.String()
		}
		b.WriteString("=" + addr(n.MinAddr))
		if n.MaxAddr.IsValid() && n.MaxAddr != n.MinAddr {
			b.WriteString("-" + addr(n.MaxAddr))
		}
		if n.MinPort != 0 {
			fmt.Fprintf(&b, ":%d", n.MinPort)
			if n.MaxPort != 0 && n.MaxPort != n.MinPort {
				fmt.Fprintf(&b, "-%d", n.MaxPort)
			}
		}
		if n.Persistent {
			b.WriteString(",persistent")
		}
		switch n.Selection {
		case NATHash:
			b.WriteString(",hash")
		case NATRandom:
			b.WriteString(",random")
		}
	}
	return b.String() + ")"
}

// ActCT sends the packet through the connection tracker.
type ActCT struct {
	Commit bool
	Zone   uint16
	// Resume is where the packet continues after conntrack (ct(table=...)).
	// It must be a forward jump; JumpNone means the packet is not recirculated.
	Resume Jump
	// NAT, when set, applies NAT (nil: none).
	NAT *NAT
	// On commit, if MarkMask != 0, Mark is stored under MarkMask in
	// ct_mark, and if LabelMask is not zero, Label under LabelMask in
	// ct_label (both in one exec(...)).
	Mark, MarkMask   uint32
	Label, LabelMask Uint128
}

// CT is the parameter set of Conntrack; it is the ActCT type.
type CT = ActCT

// Conntrack builds a conntrack action.
func Conntrack(ct CT) Action { c := ct; return &c }

func (*ActCT) isAction() {}
func (a *ActCT) Validate() error {
	if err := a.Resume.Validate(); err != nil {
		return fmt.Errorf("ct: %w", err)
	}
	if a.NAT != nil {
		if err := a.NAT.validate(); err != nil {
			return fmt.Errorf("ct: %w", err)
		}
	}
	if !a.Commit && (a.MarkMask != 0 || !a.LabelMask.IsZero()) {
		return fmt.Errorf("ct: setting ct_mark or ct_label needs commit")
	}
	return nil
}

// Format prints as ovs-ofctl does, with the resume table from p.Jump.
func (a *ActCT) Format(p Printer) string {
	var args []string
	if a.Commit {
		args = append(args, "commit")
	}
	if a.Resume.Kind != JumpNone {
		args = append(args, "table="+p.Jump(a.Resume))
	}
	if a.Zone != 0 {
		args = append(args, fmt.Sprintf("zone=%d", a.Zone))
	}
	if a.NAT != nil {
		args = append(args, a.NAT.text())
	}
	var exec []string
	if a.MarkMask != 0 {
		exec = append(exec, maskedHex(uint64(a.Mark&a.MarkMask), uint64(a.MarkMask), 0xffffffff)+"->ct_mark")
	}
	if !a.LabelMask.IsZero() {
		v := Uint128{a.Label.Hi & a.LabelMask.Hi, a.Label.Lo & a.LabelMask.Lo}
		s := v.hex()
		if a.LabelMask != (Uint128{^uint64(0), ^uint64(0)}) {
			s += "/" + a.LabelMask.hex()
		}
		exec = append(exec, s+"->ct_label")
	}
	if len(exec) > 0 {
		for i := range exec {
			exec[i] = "set_field:" + exec[i]
		}
		args = append(args, "exec("+strings.Join(exec, ",")+")")
	}
	return "ct(" + strings.Join(args, ",") + ")"
}
func (a *ActCT) String() string { return a.Format(DefaultPrinter) }

// maskedHex prints as OVS's set_field does: C's %#x ("0" for zero), the
// mask only when it is not full.
func maskedHex(v, mask, full uint64) string {
	if mask == full {
		return altHex(v)
	}
	return altHex(v) + "/" + altHex(mask)
}

func altHex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}
