package hostnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table the service plugin owns, in family ip
// and, for IPv6 NodePorts, in family ip6.
const TableName = "switchyard-service"

// NodePort is one NodePort the node's kernel hands to br-int, on the
// node's IPv4 addresses or (IPv6) its IPv6 ones: a single-stack Service's
// NodePort is open on its family's addresses only.
type NodePort struct {
	Proto uint8
	Port  uint16
	IPv6  bool
}

// ipFamily is what one nftables family's table needs: its addresses'
// length and where they sit in the IP header.
type ipFamily struct {
	table          nftables.TableFamily
	nat            uint32
	ipv6           bool
	srcOff, dstOff uint32
	addrLen        uint32
}

var (
	familyIPv4 = ipFamily{nftables.TableFamilyIPv4, unix.NFPROTO_IPV4, false, 12, 16, 4}
	familyIPv6 = ipFamily{nftables.TableFamilyIPv6, unix.NFPROTO_IPV6, true, 8, 24, 16}
)

// ApplyNodePorts replaces the plugin's tables, each in one transaction,
// with a DNAT of every NodePort on the node's addresses of its family to
// vip (IPv4) or vip6 (the port kept): the kernel then routes it into
// br-int through the gateway (the route Install set for the address),
// where the NodePort's flows balance it, and undoes the DNAT on the
// answers with its own conntrack. No NodePort of a family: no table of it.
// An invalid vip6 (no IPv6 Services) only removes an ip6 table an
// earlier, dual-stack configuration left, so an IPv4-only node never
// needs ip6 support in its kernel.
func ApplyNodePorts(nodeIPs []netip.Addr, vip, vip6 netip.Addr, ports []NodePort) error {
	var errs []error
	for _, f := range []ipFamily{familyIPv4, familyIPv6} {
		to := vip
		if f.ipv6 {
			if !vip6.IsValid() {
				if err := removeLeftTable(f); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			to = vip6
		}
		var ips []netip.Addr
		for _, a := range nodeIPs {
			if a.Unmap().Is6() == f.ipv6 {
				ips = append(ips, a.Unmap())
			}
		}
		var ps []NodePort
		for _, p := range ports {
			if p.IPv6 == f.ipv6 {
				ps = append(ps, p)
			}
		}
		if err := applyFamily(f, ips, to, ps); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLeftTable deletes family f's table if there is one. A kernel
// that cannot list the family has none.
func removeLeftTable(f ipFamily) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	ts, err := c.ListTablesOfFamily(f.table)
	if err != nil {
		return nil
	}
	for _, t := range ts {
		if t.Name == TableName {
			c.DelTable(t)
			if err := c.Flush(); err != nil {
				return fmt.Errorf("nftables: removing the %s NodePort table %s left by an earlier configuration: %w", familyName(f), TableName, err)
			}
		}
	}
	return nil
}

// applyFamily writes one family's table.
func applyFamily(f ipFamily, ips []netip.Addr, vip netip.Addr, ports []NodePort) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: TableName, Family: f.table}
	// add-delete-add: the table exists (empty) whatever was there.
	c.AddTable(t)
	c.DelTable(t)
	if len(ports) > 0 && len(ips) > 0 {
		c.AddTable(t)
		// prerouting: from other hosts and from pods; output: from the
		// node itself (its own processes dialling a NodePort on its own
		// address), after which the kernel routes again, toward br-int.
		for _, ch := range []*nftables.Chain{
			c.AddChain(&nftables.Chain{Name: "nodeports", Table: t, Type: nftables.ChainTypeNAT,
				Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest}),
			c.AddChain(&nftables.Chain{Name: "nodeports-local", Table: t, Type: nftables.ChainTypeNAT,
				Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest}),
		} {
			addNodePortRules(c, f, t, ch, ips, vip, ports)
		}
		// The node's own connections keep the node address as source
		// through the DNAT (the route was chosen before it). Masqueraded
		// to the gateway's address instead, they count as in-cluster
		// clients in br-int and get answers back through br-int from an
		// endpoint on any node; with the node address, an endpoint on
		// another node would answer over the underlay, past the conntrack
		// entry here that must undo the DNAT.
		masq := c.AddChain(&nftables.Chain{Name: "nodeports-masquerade", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		for _, ip := range ips {
			c.AddRule(&nftables.Rule{Table: t, Chain: masq, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.srcOff, Len: f.addrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.AsSlice()},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.dstOff, Len: f.addrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip.AsSlice()},
				&expr.Masq{},
			}})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the NodePort table %s (%s): %w", TableName, familyName(f), err)
	}
	return nil
}

func familyName(f ipFamily) string {
	if f.ipv6 {
		return "ip6"
	}
	return "ip"
}

// addNodePortRules DNATs every (address, protocol, port) of the node to vip.
func addNodePortRules(c *nftables.Conn, f ipFamily, t *nftables.Table, ch *nftables.Chain, ips []netip.Addr, vip netip.Addr, ports []NodePort) {
	for _, ip := range ips {
		for _, p := range ports {
			port := binary.BigEndian.AppendUint16(nil, p.Port)
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.dstOff, Len: f.addrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.AsSlice()},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p.Proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
				&expr.Immediate{Register: 1, Data: vip.AsSlice()},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nat, RegAddrMin: 1},
			}})
		}
	}
}
