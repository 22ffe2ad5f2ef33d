package openflow

import (
	"net"
	"net/netip"
	"sort"
	"strings"

	of "switchyard.dev/switchyard/host/openflow"
)

// podFlow is a realistic L3 forwarding flow for one pod: match its IP,
// rewrite MACs, load its ofport into reg1 and continue.
func podFlow(table uint8, cookie uint64, i int) of.Flow {
	ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	mac := net.HardwareAddr{0x0a, 0x58, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
	return of.Flow{Table: table, Priority: 200, Cookie: cookie,
		Match: of.Match{of.EthType(0x0800), of.Addr(of.FieldIPv4Dst, ip)},
		Instructions: []of.Instruction{of.Apply(
			of.Set(of.MAC(of.FieldEthSrc, net.HardwareAddr{0x0a, 0x58, 0, 0, 0, 1})),
			of.Set(of.MAC(of.FieldEthDst, mac)),
			of.Load(of.FieldReg1, 0, 16, uint64(i%60000+1)),
			of.DecTTL{},
		), of.Goto(table + 1)}}
}

// conjFlow is one clause flow of a NetworkPolicy conjunction: even i
// match a peer address (clause 1/2), odd i a destination port (2/2).
func conjFlow(table uint8, cookie uint64, i int) of.Flow {
	id := uint32(i/64 + 1)
	if i%2 == 0 {
		ip := netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)})
		return of.Flow{Table: table, Priority: 300, Cookie: cookie,
			Match:        of.Match{of.EthType(0x0800), of.Addr(of.FieldIPv4Src, ip)},
			Instructions: []of.Instruction{of.Apply(of.Conjunction{ID: id, Clause: 1, NClauses: 2})}}
	}
	return of.Flow{Table: table, Priority: 300, Cookie: cookie,
		Match:        of.Match{of.EthType(0x0800), of.IPProto(6), of.Exact(of.FieldTCPDst, uint64(i%65535+1)), of.Reg(2, uint32(i), 0xffffffff)},
		Instructions: []of.Instruction{of.Apply(of.Conjunction{ID: id, Clause: 2, NClauses: 2})}}
}

// mixedFlows returns n distinct flows in one table: 60% pod forwarding,
// 40% conjunction clauses.
func mixedFlows(table uint8, cookie uint64, n int) []of.Flow {
	out := make([]of.Flow, 0, n)
	for i := range n {
		if i%5 < 3 {
			out = append(out, podFlow(table, cookie, i))
		} else {
			out = append(out, conjFlow(table, cookie, i))
		}
	}
	return out
}

func adds(flows []of.Flow) []of.FlowMod {
	mods := make([]of.FlowMod, len(flows))
	for i, f := range flows {
		mods[i] = of.FlowMod{Command: of.FlowAdd, Flow: f}
	}
	return mods
}

// texts renders flows as dump-flows lines, sorted.
func texts(flows []of.Flow) []string {
	out := make([]string, len(flows))
	for i := range flows {
		out[i] = flows[i].String()
	}
	sort.Strings(out)
	return out
}

// parseDump turns `ovs-ofctl --no-stats dump-flows` output into sorted lines.
func parseDump(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "OFPST_") {
			continue
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}
