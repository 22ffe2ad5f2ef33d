package hostnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family ip) the service plugin owns.
const TableName = "switchyard-service"

// NodePort is one NodePort the node's kernel hands to br-int.
type NodePort struct {
	Proto uint8
	Port  uint16
}

// ApplyNodePorts replaces the plugin's table, in one transaction, with a
// DNAT of every NodePort on the node's addresses to vip (the port kept):
// the kernel then routes it into br-int through the gateway (the route
// Install set for vip), where the NodePort's flows balance it, and undoes
// the DNAT on the answers with its own conntrack. No NodePort: no table.
func ApplyNodePorts(nodeIPs []netip.Addr, vip netip.Addr, ports []NodePort) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
	// add-delete-add: the table exists (empty) whatever was there.
	c.AddTable(t)
	c.DelTable(t)
	var v4 []netip.Addr
	for _, a := range nodeIPs {
		if a.Is4() {
			v4 = append(v4, a)
		}
	}
	if len(ports) > 0 && len(v4) > 0 {
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
			addNodePortRules(c, t, ch, v4, vip, ports)
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
		to := vip.As4()
		for _, ip := range v4 {
			src := ip.As4()
			c.AddRule(&nftables.Rule{Table: t, Chain: masq, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src[:]},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: to[:]},
				&expr.Masq{},
			}})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the NodePort table %s: %w", TableName, err)
	}
	return nil
}

// addNodePortRules DNATs every (address, protocol, port) of the node to vip.
func addNodePortRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, v4 []netip.Addr, vip netip.Addr, ports []NodePort) {
	to := vip.As4()
	for _, ip := range v4 {
		dst := ip.As4()
		for _, p := range ports {
			port := binary.BigEndian.AppendUint16(nil, p.Port)
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst[:]},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p.Proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
				&expr.Immediate{Register: 1, Data: to[:]},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
			}})
		}
	}
}
