package hostnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"switchyard.dev/switchyard/plugins/internal/nftmatch"
)

// TableName is the nftables table (in families ip and ip6) the plugin owns.
const TableName = "switchyard-tunnel"

// Masq is what the masquerade rules need.
type Masq struct {
	// PodCIDRs are this node's pod ranges: the sources to masquerade.
	PodCIDRs []netip.Prefix
	// Gateway is the gateway device; traffic leaving through it (to local
	// pods) is never masqueraded.
	Gateway string
	// Keep are destinations never masqueraded: every pod CIDR and node IP
	// of the cluster.
	Keep []netip.Prefix
}

// Apply replaces the masquerade tables with m's rules in one transaction.
func Apply(m Masq) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		t := &nftables.Table{Name: TableName, Family: fam}
		// add-delete-add: the table exists (empty) whatever was there.
		c.AddTable(t)
		c.DelTable(t)
		c.AddTable(t)
		ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		for _, src := range m.PodCIDRs {
			if src.Addr().Is4() != (fam == nftables.TableFamilyIPv4) {
				continue
			}
			for _, dst := range m.Keep {
				if dst.Addr().Is4() != src.Addr().Is4() {
					continue
				}
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(
					nftmatch.Prefix(src, true), nftmatch.Prefix(dst, false),
					[]expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}})})
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(
				nftmatch.Prefix(src, true),
				[]expr.Any{
					&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
					&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: nftmatch.IfName(m.Gateway)},
					&expr.Masq{},
				})})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the masquerade tables %s: %w", TableName, err)
	}
	return nil
}

// Remove deletes the masquerade tables.
func Remove() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		t := &nftables.Table{Name: TableName, Family: fam}
		c.AddTable(t)
		c.DelTable(t)
	}
	return c.Flush()
}
