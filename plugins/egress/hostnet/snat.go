package hostnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"switchyard.dev/switchyard/plugins/internal/nftmatch"
)

// TableName is the nftables table (in families ip and ip6) the plugin
// owns.
const TableName = "switchyard-egress"

// SNAT is one Egress IP this node holds and what it translates.
type SNAT struct {
	IP netip.Addr
	// Mark and MarkMask: packets whose pkt_mark&MarkMask == Mark (set in
	// OVS; the kernel datapath carries it).
	Mark, MarkMask uint32
	// Sources are the selected pods' addresses of IP's family (the
	// userspace datapath does not carry pkt_mark into the kernel).
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

var families = []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6}

// ApplySNAT replaces the tables (ip and ip6) with r's rules in one
// transaction: each Egress IP translates the sources of its own family.
// The marked packets of an IPv4 Egress IP are IPv4 ones, so the mark
// rule of an IP sits only in its family's table.
func ApplySNAT(r Rules) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	for _, fam := range families {
		v4 := fam == nftables.TableFamilyIPv4
		t := &nftables.Table{Name: TableName, Family: fam}
		c.AddTable(t)
		c.DelTable(t)
		c.AddTable(t)
		prio := nftables.ChainPriority(*nftables.ChainPriorityNATSource - 10)
		ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: &prio})
		ret := []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
		oif := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: nftmatch.IfName(r.Gateway)},
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(oif, ret)})
		for _, k := range r.Keep {
			if k.Addr().Is4() == v4 {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(nftmatch.Prefix(k, false), ret)})
			}
		}
		for _, s := range r.SNATs {
			if s.IP.Is4() != v4 {
				continue
			}
			to := snatTo(s.IP, fam)
			if s.MarkMask != 0 {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat([]expr.Any{
					&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
					&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: nftmatch.LE32(s.MarkMask), Xor: nftmatch.LE32(0)},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: nftmatch.LE32(s.Mark)},
				}, to)})
			}
			for _, src := range s.Sources {
				if src.Is4() == v4 {
					c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(nftmatch.Prefix(netip.PrefixFrom(src, src.BitLen()), true), to)})
				}
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the SNAT tables %s: %w", TableName, err)
	}
	return nil
}

// RemoveSNAT deletes the tables.
func RemoveSNAT() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	for _, fam := range families {
		t := &nftables.Table{Name: TableName, Family: fam}
		c.AddTable(t)
		c.DelTable(t)
	}
	return c.Flush()
}

func snatTo(ip netip.Addr, fam nftables.TableFamily) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: ip.AsSlice()},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: uint32(fam), RegAddrMin: 1},
	}
}
