package hostnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// TableName is the nftables table (family ip) the plugin owns.
const TableName = "switchyard-egress"

// SNAT is one Egress IP this node holds and what it translates.
type SNAT struct {
	IP netip.Addr
	// Mark and MarkMask: packets whose pkt_mark&MarkMask == Mark (set in
	// OVS; the kernel datapath carries it).
	Mark, MarkMask uint32
	// Sources are the selected pods' addresses (the userspace datapath
	// does not carry pkt_mark into the kernel).
	Sources []netip.Addr
}

// Rules is the whole SNAT configuration of the node.
type Rules struct {
	// Keep are destinations never translated: pod CIDRs, node IPs,
	// Service CIDRs, exceptCIDRs.
	Keep []netip.Prefix
	// Gateway is the pod gateway device; traffic leaving through it goes
	// to pods and is never translated.
	Gateway string
	SNATs   []SNAT
}

// ApplySNAT replaces the table with r's rules in one transaction (IPv4;
// IPv6 Egress IPs are not supported yet).
func ApplySNAT(r Rules) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	prio := nftables.ChainPriority(*nftables.ChainPriorityNATSource - 10)
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: &prio})
	ret := []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
	oif := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(r.Gateway)},
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(oif, ret)})
	for _, k := range r.Keep {
		if k.Addr().Is4() {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(matchPrefix(k, false), ret)})
		}
	}
	for _, s := range r.SNATs {
		if !s.IP.Is4() {
			continue
		}
		to := snatTo(s.IP)
		if s.MarkMask != 0 {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat([]expr.Any{
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le32(s.MarkMask), Xor: le32(0)},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: le32(s.Mark)},
			}, to)})
		}
		for _, src := range s.Sources {
			if src.Is4() {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(matchPrefix(netip.PrefixFrom(src, 32), true), to)})
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the SNAT table %s: %w", TableName, err)
	}
	return nil
}

// RemoveSNAT deletes the table.
func RemoveSNAT() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	return c.Flush()
}

func snatTo(ip netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: ip.AsSlice()},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: uint32(nftables.TableFamilyIPv4), RegAddrMin: 1},
	}
}

// le32 is a 32-bit value as nftables holds meta mark: host byte order
// (little-endian on the machines we run on).
func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// matchPrefix compares the IPv4 source or destination with p.
func matchPrefix(p netip.Prefix, src bool) []expr.Any {
	var off uint32 = 16
	if src {
		off = 12
	}
	mask := make([]byte, 4)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

func ifname(s string) []byte {
	b := make([]byte, 16)
	copy(b, s)
	return b
}
