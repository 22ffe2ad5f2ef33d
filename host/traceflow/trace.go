package traceflow

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"switchyard.dev/switchyard/host/openflow"
)

// ct_state bits (ovs-fields(7)).
const (
	CTNew uint32 = 0x01
	CTEst uint32 = 0x02
	CTTrk uint32 = 0x20
)

// maxSteps bounds the walk: a resubmit loop in the flows ends the trace
// with a note instead of hanging the agent.
const maxSteps = 256

// Pipeline is the switch's state the walk reads.
type Pipeline struct {
	// Flows per table, as dumped; Run sorts them by priority.
	Flows map[uint8][]openflow.Flow
	// Groups by ID, as dumped.
	Groups map[uint32]openflow.GroupDesc
}

// Packet is the packet and its metadata: any field, by its value as
// openflow.MatchField holds it (big-endian, left-aligned). Fields never set
// read as zero.
type Packet struct {
	vals map[openflow.Field][16]byte
}

// NewPacket returns an empty packet.
func NewPacket() *Packet { return &Packet{vals: map[openflow.Field][16]byte{}} }

// Clone copies the packet.
func (p *Packet) Clone() *Packet {
	q := NewPacket()
	for k, v := range p.vals {
		q.vals[k] = v
	}
	return q
}

// Set sets a field to a value up to 64 bits wide.
func (p *Packet) Set(f openflow.Field, v uint64) {
	m := openflow.Exact(f, v)
	p.SetBytes(f, m.Value[:f.Size()])
}

// SetBytes sets a field from its big-endian bytes.
func (p *Packet) SetBytes(f openflow.Field, b []byte) {
	if reg, ok := xxregOf(f); ok { // keep one copy of reg0-15
		var v [16]byte
		copy(v[:], b)
		for i := range 4 {
			p.vals[openflow.FieldReg0+openflow.Field(reg*4+i)] = [16]byte(append(v[4*i:4*i+4:4*i+4], make([]byte, 12)...))
		}
		return
	}
	var v [16]byte
	copy(v[:f.Size()], b)
	p.vals[f] = v
}

// Get returns a field's bytes (Size() of them).
func (p *Packet) Get(f openflow.Field) []byte {
	if reg, ok := xxregOf(f); ok {
		out := make([]byte, 0, 16)
		for i := range 4 {
			v := p.vals[openflow.FieldReg0+openflow.Field(reg*4+i)]
			out = append(out, v[:4]...)
		}
		return out
	}
	v := p.vals[f]
	return v[:f.Size()]
}

// Uint returns a field up to 64 bits wide.
func (p *Packet) Uint(f openflow.Field) uint64 {
	var v uint64
	for _, c := range p.Get(f) {
		v = v<<8 | uint64(c)
	}
	return v
}

func xxregOf(f openflow.Field) (int, bool) {
	if f >= openflow.FieldXXReg0 && f <= openflow.FieldXXReg3 {
		return int(f - openflow.FieldXXReg0), true
	}
	return 0, false
}

// matches says whether the packet matches every field of m.
func (p *Packet) matches(m openflow.Match) bool {
	for _, mf := range m {
		v := p.Get(mf.Field)
		for i := range v {
			want := mf.Value[i]
			if mf.Masked {
				if v[i]&mf.Mask[i] != want {
					return false
				}
			} else if v[i] != want {
				return false
			}
		}
	}
	return true
}

// getBits reads n bits at ofs (bit 0 is the least significant) of f.
func (p *Packet) getBits(s openflow.Subfield) []bool {
	b := p.Get(s.Field)
	n := int(s.Bits)
	if n == 0 {
		n = s.Field.Bits()
	}
	out := make([]bool, n)
	for i := range n {
		bit := int(s.Ofs) + i
		out[i] = b[len(b)-1-bit/8]&(1<<(bit%8)) != 0
	}
	return out
}

func (p *Packet) setBits(s openflow.Subfield, bits []bool) {
	b := slices.Clone(p.Get(s.Field))
	for i, on := range bits {
		bit := int(s.Ofs) + i
		idx := len(b) - 1 - bit/8
		if on {
			b[idx] |= 1 << (bit % 8)
		} else {
			b[idx] &^= 1 << (bit % 8)
		}
	}
	p.SetBytes(s.Field, b)
}

func bitsUint(bs []bool) uint64 {
	var v uint64
	for i := len(bs) - 1; i >= 0; i-- {
		v <<= 1
		if bs[i] {
			v |= 1
		}
	}
	return v
}

// setField applies a set_field (masked: only the bits under the mask).
func (p *Packet) setField(mf openflow.MatchField) {
	if !mf.Masked {
		p.SetBytes(mf.Field, mf.Value[:mf.Field.Size()])
		return
	}
	b := slices.Clone(p.Get(mf.Field))
	for i := range b {
		b[i] = b[i]&^mf.Mask[i] | mf.Value[i]&mf.Mask[i]
	}
	p.SetBytes(mf.Field, b)
}

// Hop is one flow the packet matched.
type Hop struct {
	Table    uint8
	Priority uint16
	Cookie   uint64
	// Flow is the flow's canonical text (as ovs-ofctl prints it), and
	// Match its match (nil on a miss).
	Flow  string
	Match openflow.Match
	// Depth is the resubmit/recirculation nesting (0: the main pipeline).
	Depth int
	// Notes say what the flow did that the trace modelled or skipped
	// ("ct(zone=5): continues as +trk+new", "learn: not executed").
	Notes []string
	// End is set on the last hop of a path that matched no flow ("miss")
	// or whose actions neither output nor continue ("drop").
	End string
}

// Output is one place the packet left the pipeline.
type Output struct {
	Port uint32
	// Hop is the index (in Result.Hops) of the flow that output it.
	Hop int
	// Packet is the packet as it left (tun_dst set for a tunnel, etc.).
	Packet *Packet
}

// Result is a walk's outcome.
type Result struct {
	Hops    []Hop
	Outputs []Output
	// Controller lists hops that sent the packet to the controller.
	Controller []int
	// Drops lists hops whose path ended without output.
	Drops []int
	// Truncated is set when maxSteps ended the walk.
	Truncated bool
}

type walker struct {
	pl    *Pipeline
	res   Result
	steps int
}

// Run walks pkt from table 0 (as if it arrived on its in_port).
func Run(pl *Pipeline, pkt *Packet) *Result {
	for t := range pl.Flows {
		slices.SortStableFunc(pl.Flows[t], func(a, b openflow.Flow) int { return int(b.Priority) - int(a.Priority) })
	}
	w := &walker{pl: pl}
	w.table(0, pkt, 0)
	return &w.res
}

// lookup finds the flow the classifier picks in table t, conjunctive
// matches included: a conjunction whose every clause matched at a
// priority above the best plain match sets conj_id and the table is
// searched again for the flow matching that conj_id.
func (w *walker) lookup(t uint8, pkt *Packet) *openflow.Flow {
	type conj struct {
		prio    uint16
		n       uint8
		clauses map[uint8]bool
	}
	conjs := map[uint32]*conj{}
	complete := func(above int) (uint32, bool) {
		best, bestPrio, ok := uint32(0), -1, false
		for id, c := range conjs {
			if int(c.prio) > above && len(c.clauses) == int(c.n) && int(c.prio) > bestPrio {
				best, bestPrio, ok = id, int(c.prio), true
			}
		}
		return best, ok
	}
	flows := w.pl.Flows[t]
	for i := range flows {
		f := &flows[i]
		if !pkt.matches(f.Match) {
			continue
		}
		cs := conjunctions(f)
		if len(cs) == 0 {
			if id, ok := complete(int(f.Priority)); ok {
				return w.conjLookup(t, pkt, id)
			}
			return f
		}
		for _, c := range cs {
			cj := conjs[c.ID]
			if cj == nil {
				cj = &conj{prio: f.Priority, n: c.NClauses, clauses: map[uint8]bool{}}
				conjs[c.ID] = cj
			}
			cj.clauses[c.Clause] = true
		}
	}
	if id, ok := complete(-1); ok {
		return w.conjLookup(t, pkt, id)
	}
	return nil
}

func (w *walker) conjLookup(t uint8, pkt *Packet, id uint32) *openflow.Flow {
	pkt.Set(openflow.FieldConjID, uint64(id))
	defer pkt.Set(openflow.FieldConjID, 0)
	for i := range w.pl.Flows[t] {
		f := &w.pl.Flows[t][i]
		if len(conjunctions(f)) == 0 && pkt.matches(f.Match) && slices.ContainsFunc(f.Match, func(m openflow.MatchField) bool { return m.Field == openflow.FieldConjID }) {
			return f
		}
	}
	return nil
}

func conjunctions(f *openflow.Flow) []openflow.Conjunction {
	var out []openflow.Conjunction
	for _, in := range f.Instructions {
		if aa, ok := in.(openflow.ApplyActions); ok {
			for _, a := range aa.Actions {
				if c, ok := a.(openflow.Conjunction); ok {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// table runs pkt through table t and what follows from it.
func (w *walker) table(t uint8, pkt *Packet, depth int) {
	w.steps++
	if w.steps > maxSteps {
		w.res.Truncated = true
		return
	}
	f := w.lookup(t, pkt)
	if f == nil {
		// OpenFlow 1.3+: a table miss with no miss flow drops.
		w.res.Hops = append(w.res.Hops, Hop{Table: t, Depth: depth, End: "miss"})
		w.res.Drops = append(w.res.Drops, len(w.res.Hops)-1)
		return
	}
	hop := len(w.res.Hops)
	w.res.Hops = append(w.res.Hops, Hop{Table: t, Priority: f.Priority, Cookie: f.Cookie, Flow: flowText(f), Match: f.Match, Depth: depth})
	continued := false
	var writeSet []openflow.Action
	gotoT := -1
	for _, in := range f.Instructions {
		switch in := in.(type) {
		case openflow.ApplyActions:
			if w.actions(hop, t, in.Actions, pkt, depth) {
				continued = true
			}
		case openflow.WriteActions:
			writeSet = append(writeSet, in.Actions...)
		case openflow.ClearActions:
			writeSet = nil
		case openflow.WriteMetadata:
			m := pkt.Uint(openflow.FieldMetadata)
			pkt.Set(openflow.FieldMetadata, m&^in.Mask|in.Metadata&in.Mask)
		case openflow.GotoTable:
			gotoT = int(in.Table)
		}
	}
	if gotoT >= 0 {
		w.table(uint8(gotoT), pkt, depth)
		return
	}
	if len(writeSet) > 0 && w.actions(hop, t, writeSet, pkt, depth) {
		continued = true
	}
	if !continued {
		w.res.Hops[hop].End = "drop"
		w.res.Drops = append(w.res.Drops, hop)
	}
}

// actions runs an action list of the flow at hop; it reports whether
// the packet went anywhere (output, controller, resubmit, recirculation).
func (w *walker) actions(hop int, t uint8, as []openflow.Action, pkt *Packet, depth int) bool {
	went := false
	note := func(s string) { w.res.Hops[hop].Notes = append(w.res.Hops[hop].Notes, s) }
	for _, a := range as {
		switch a := a.(type) {
		case openflow.Output:
			went = true
			w.output(hop, a.Port, pkt)
		case openflow.OutputReg:
			went = true
			w.output(hop, uint32(bitsUint(pkt.getBits(a.Src))), pkt)
		case openflow.SetField:
			pkt.setField(a.MatchField)
		case openflow.Move:
			pkt.setBits(a.Dst, pkt.getBits(a.Src))
		case openflow.Resubmit:
			went = true
			next := a.Table
			if next == openflow.TableNone {
				next = t
			}
			inPort := pkt.Uint(openflow.FieldInPort)
			if a.Port != openflow.PortInPort && a.Port != 0 {
				pkt.Set(openflow.FieldInPort, uint64(a.Port))
			}
			w.table(next, pkt, depth+1)
			pkt.Set(openflow.FieldInPort, inPort)
		case openflow.CT:
			zone := uint64(a.Zone)
			if a.ZoneSrc.Field != openflow.FieldNone {
				zone = bitsUint(pkt.getBits(a.ZoneSrc))
			}
			if a.Commit {
				for _, x := range a.Exec {
					if sf, ok := x.(openflow.SetField); ok {
						pkt.setField(sf.MatchField)
					}
				}
			}
			// A new connection's NAT is the range's first address and
			// port; a committed translation moves the packet itself, so
			// later tables (and the verdict) see the endpoint it chose.
			if a.NAT != nil && a.Commit && a.NAT.MinAddr.IsValid() && a.NAT.Flags&(openflow.NATSrc|openflow.NATDst) != 0 {
				addrField, portDir := openflow.FieldIPv4Dst, "destination"
				if a.NAT.Flags&openflow.NATSrc != 0 {
					addrField, portDir = openflow.FieldIPv4Src, "source"
				}
				if a.NAT.MinAddr.Is6() {
					addrField = map[openflow.Field]openflow.Field{openflow.FieldIPv4Dst: openflow.FieldIPv6Dst, openflow.FieldIPv4Src: openflow.FieldIPv6Src}[addrField]
				}
				pkt.SetBytes(addrField, a.NAT.MinAddr.AsSlice())
				to := a.NAT.MinAddr.String()
				if a.NAT.MinPort != 0 {
					if pf, ok := natPortField(pkt, a.NAT.Flags&openflow.NATSrc != 0); ok {
						pkt.Set(pf, uint64(a.NAT.MinPort))
						to = netip.AddrPortFrom(a.NAT.MinAddr, a.NAT.MinPort).String()
					}
				}
				note(fmt.Sprintf("ct(zone=%d) nat: %s translated to %s", zone, portDir, to))
			}
			if !a.Recirc {
				note(fmt.Sprintf("ct(zone=%d): tracked, no recirculation", zone))
				continue
			}
			went = true
			note(fmt.Sprintf("ct(zone=%d): continues in table %d as a new connection (+trk+new)", zone, a.Table))
			rec := pkt.Clone()
			rec.Set(openflow.FieldCTState, uint64(CTTrk|CTNew))
			rec.Set(openflow.FieldCTZone, zone)
			w.table(a.Table, rec, depth+1)
		case openflow.CTClear:
			pkt.Set(openflow.FieldCTState, 0)
			pkt.Set(openflow.FieldCTZone, 0)
		case openflow.Group:
			went = true
			w.group(hop, t, a.ID, pkt, depth)
		case openflow.Controller:
			went = true
			w.res.Controller = append(w.res.Controller, hop)
			note("sent to the controller (the agent)")
		case openflow.DecTTL:
			ttl := pkt.Uint(openflow.FieldIPTTL)
			if ttl <= 1 {
				note("dec_ttl: TTL expired")
				return went
			}
			pkt.Set(openflow.FieldIPTTL, ttl-1)
		case openflow.Conjunction, openflow.Note, openflow.Meter:
		default:
			note(fmt.Sprintf("%s: not modelled by the trace", strings.SplitN(fmt.Sprint(a), "(", 2)[0]))
		}
	}
	return went
}

func (w *walker) output(hop int, port uint32, pkt *Packet) {
	if port == openflow.PortInPort {
		port = uint32(pkt.Uint(openflow.FieldInPort))
	}
	if port == openflow.PortController {
		w.res.Controller = append(w.res.Controller, hop)
		return
	}
	w.res.Outputs = append(w.res.Outputs, Output{Port: port, Hop: hop, Packet: pkt.Clone()})
}

func (w *walker) group(hop int, t uint8, id uint32, pkt *Packet, depth int) {
	g, ok := w.pl.Groups[id]
	if !ok || len(g.Buckets) == 0 {
		w.res.Hops[hop].Notes = append(w.res.Hops[hop].Notes, fmt.Sprintf("group %d: no such group or no buckets: dropped", id))
		return
	}
	buckets := g.Buckets
	if g.Type != openflow.GroupTypeAll {
		buckets = buckets[:1]
		if g.Type == openflow.GroupTypeSelect && len(g.Buckets) > 1 {
			w.res.Hops[hop].Notes = append(w.res.Hops[hop].Notes, fmt.Sprintf("group %d: select group of %d buckets, traced through its first (the switch picks by hash)", id, len(g.Buckets)))
		}
	}
	for _, b := range buckets {
		w.actions(hop, t, b.Actions, pkt.Clone(), depth+1)
	}
}

// natPortField is the L4 port a NAT rewrites for pkt's protocol.
func natPortField(pkt *Packet, src bool) (openflow.Field, bool) {
	fields := map[uint64][2]openflow.Field{
		6:   {openflow.FieldTCPSrc, openflow.FieldTCPDst},
		17:  {openflow.FieldUDPSrc, openflow.FieldUDPDst},
		132: {openflow.FieldSCTPSrc, openflow.FieldSCTPDst},
	}
	f, ok := fields[pkt.Uint(openflow.FieldIPProto)]
	if !ok {
		return 0, false
	}
	if src {
		return f[0], true
	}
	return f[1], true
}

func flowText(f *openflow.Flow) string {
	g := *f
	return g.String()
}
