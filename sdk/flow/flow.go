package flow

import (
	"errors"
	"fmt"
	"strings"
)

// Flow is one OpenFlow flow as a plugin writes it.
type Flow struct {
	// Table is the name of the table the flow goes into: one the plugin
	// declared, or another plugin's exported table.
	Table    string
	Priority uint16
	Match    Match
	// Actions run in order (an OpenFlow apply-actions instruction). An empty
	// list with no Goto drops the packet.
	Actions []Action
	// Goto continues the packet in another table after Actions.
	Goto Jump
	// Tag is the plugin's own 32 bits of the flow cookie (e.g. a policy ID),
	// returned with packet-ins. The host fills the upper 32 bits.
	Tag         uint32
	IdleTimeout uint16
	HardTimeout uint16
}

// Key identifies a flow on the switch: OpenFlow treats two flows with the
// same table, priority and match as the same flow.
type Key struct {
	Table    string
	Priority uint16
	Match    string // canonical match text
}

func (k Key) String() string {
	return fmt.Sprintf("table=%s, priority=%d, %s", k.Table, k.Priority, k.Match)
}

// Key returns the flow's identity.
func (f *Flow) Key() Key { return Key{Table: f.Table, Priority: f.Priority, Match: f.Match.String()} }

// Jumps lists every jump the flow makes (its Goto and any ct(table=)).
func (f *Flow) Jumps() []Jump {
	var js []Jump
	for _, a := range f.Actions {
		if j, ok := JumpOf(a); ok {
			js = append(js, j)
		}
	}
	if f.Goto.Kind != JumpNone {
		js = append(js, f.Goto)
	}
	return js
}

// Fields lists every register field the flow reads or writes.
func (f *Flow) Fields() []Field {
	var fs []Field
	for _, m := range f.Match.Fields() {
		if m.Kind == MatchRegField {
			fs = append(fs, m.Field)
		}
	}
	for _, a := range f.Actions {
		fs = appendActionFields(fs, a)
	}
	return fs
}

// ActionFields lists the register fields actions read or write.
func ActionFields(as []Action) []Field {
	var fs []Field
	for _, a := range as {
		fs = appendActionFields(fs, a)
	}
	return fs
}

func appendActionFields(fs []Field, a Action) []Field {
	op := func(o Operand) {
		if f, ok := o.Reg(); ok {
			fs = append(fs, f)
		}
	}
	switch a := a.(type) {
	case *ActOutputField:
		fs = append(fs, a.Field)
	case *ActLoad:
		fs = append(fs, a.Field)
	case *ActMove:
		op(a.From)
		op(a.To)
	case *ActLearn:
		for _, s := range a.Specs {
			op(s.Src)
			op(s.Dst)
		}
	}
	return fs
}

// validateActions checks each action, naming nil ones (what a decoder
// yields for an action kind it does not know).
func validateActions(as []Action) []error {
	var errs []error
	for i, a := range as {
		if a == nil {
			errs = append(errs, fmt.Errorf("action %d is missing or of an unknown kind", i))
			continue
		}
		if err := a.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func formatAction(a Action, p Printer) string {
	if a == nil {
		return "<unknown action>"
	}
	return a.Format(p)
}

// Validate checks the flow's own shape.
func (f *Flow) Validate() error {
	var errs []error
	if f.Table == "" {
		errs = append(errs, errors.New("flow has no table"))
	}
	for _, m := range f.Match.Fields() {
		if err := m.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.Match.checkPrerequisites(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validateActions(f.Actions)...)
	for _, j := range f.Jumps() {
		if err := j.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	// OVS accepts conjunction actions only on their own: the flow is a
	// clause, and the packet's fate is decided by the conj_id flow.
	conj := 0
	for _, a := range f.Actions {
		if _, ok := a.(*ActConjunction); ok {
			conj++
		}
	}
	if conj > 0 && (conj != len(f.Actions) || len(f.Jumps()) != 0) {
		errs = append(errs, errors.New("a flow with conjunction actions may hold no other actions and no jump"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flow %s: %w", f.Key(), err)
	}
	return nil
}

// String is the canonical text form, symbolic:
//
//	table=classifier, priority=100, ip,in_port=3 actions=load:0x1->reg:sdk.pkt_source,goto_table:@next
func (f *Flow) String() string {
	return f.Format(f.Table, DefaultPrinter, f.Match.String())
}

// Format renders the flow with a given table label, printer and match text.
// The host uses it to print the resolved form.
func (f *Flow) Format(table string, p Printer, match string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table=%s, priority=%d", table, f.Priority)
	if f.IdleTimeout != 0 {
		fmt.Fprintf(&b, ", idle_timeout=%d", f.IdleTimeout)
	}
	if f.HardTimeout != 0 {
		fmt.Fprintf(&b, ", hard_timeout=%d", f.HardTimeout)
	}
	if match != "" {
		b.WriteString(", ")
		b.WriteString(match)
	}
	b.WriteString(" actions=")
	b.WriteString(f.FormatActions(p))
	return b.String()
}

// FormatActions renders the actions and the Goto as the part of a flow's
// text after "actions=" ("drop" when there are none).
func (f *Flow) FormatActions(p Printer) string {
	var acts []string
	for _, a := range f.Actions {
		acts = append(acts, formatAction(a, p))
	}
	if f.Goto.Kind != JumpNone {
		acts = append(acts, "goto_table:"+p.Jump(f.Goto))
	}
	if len(acts) == 0 {
		acts = []string{"drop"}
	}
	return strings.Join(acts, ",")
}

// GroupType is the OpenFlow group type.
type GroupType uint8

const (
	GroupAll GroupType = iota
	GroupSelect
	GroupIndirect
	GroupFastFailover
)

var groupTypeNames = [...]string{"all", "select", "indirect", "ff"}

func (t GroupType) String() string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return fmt.Sprintf("group_type(%d)", uint8(t))
}

// Bucket is one bucket of a group.
type Bucket struct {
	Weight    uint16 // select groups
	WatchPort uint32 // fast-failover groups; 0 means none
	Actions   []Action
}

// Group is an OpenFlow group. ID is local to the plugin (below 1<<24); the
// host maps it into the plugin's share of the group-ID space.
type Group struct {
	ID      uint32
	Type    GroupType
	Buckets []Bucket
	// Selection, for select groups, says how the switch picks a bucket
	// (nil: the switch's default).
	Selection *Selection
}

// SelectionMethod is how a select group hashes packets onto buckets.
type SelectionMethod uint8

const (
	// SelectHash hashes the listed Fields of each packet (OVS "hash").
	SelectHash SelectionMethod = iota + 1
	// SelectDPHash hashes in the datapath (OVS "dp_hash"), no fields.
	SelectDPHash
	numSelectionMethods
)

func (m SelectionMethod) String() string {
	switch m {
	case SelectHash:
		return "hash"
	case SelectDPHash:
		return "dp_hash"
	}
	return fmt.Sprintf("selection(%d)", uint8(m))
}

// Selection is a select group's selection method: with SelectHash,
// packets that agree on Fields (e.g. MatchIPv4Src and MatchTCPSrc) go to
// the same bucket, buckets shared by Weight.
type Selection struct {
	Method SelectionMethod
	Fields []MatchKind
}

var hashable = map[MatchKind]bool{
	MatchEthSrc: true, MatchEthDst: true, MatchEthType: true, MatchVlanVID: true, MatchIPProto: true,
	MatchIPv4Src: true, MatchIPv4Dst: true, MatchIPv6Src: true, MatchIPv6Dst: true,
	MatchTCPSrc: true, MatchTCPDst: true, MatchUDPSrc: true, MatchUDPDst: true, MatchSCTPSrc: true, MatchSCTPDst: true,
}

func (s *Selection) validate() error {
	if s.Method == 0 || s.Method >= numSelectionMethods {
		return fmt.Errorf("unknown selection method %d", s.Method)
	}
	if s.Method == SelectDPHash && len(s.Fields) > 0 {
		return fmt.Errorf("selection method dp_hash takes no fields")
	}
	for _, k := range s.Fields {
		if !hashable[k] {
			return fmt.Errorf("selection method hash cannot hash %s", k)
		}
	}
	return nil
}

// text prints as ovs-ofctl dump-groups does.
func (s *Selection) text() string {
	t := "selection_method=" + s.Method.String()
	if len(s.Fields) > 0 {
		var names []string
		for _, k := range s.Fields {
			if !k.Valid() {
				names = append(names, k.String())
				continue
			}
			names = append(names, matchKinds[k].setName())
		}
		t += ",fields(" + strings.Join(names, ",") + ")"
	}
	return t
}

// MaxLocalGroupID bounds Group.ID.
const MaxLocalGroupID = 1<<24 - 1

// Validate checks the group's shape.
func (g *Group) Validate() error {
	if g.ID == 0 || g.ID > MaxLocalGroupID {
		return fmt.Errorf("group id %d out of range 1..%d", g.ID, MaxLocalGroupID)
	}
	if g.Type > GroupFastFailover {
		return fmt.Errorf("group %d: unknown type %d", g.ID, g.Type)
	}
	if g.Selection != nil {
		if g.Type != GroupSelect {
			return fmt.Errorf("group %d: a selection method needs a select group", g.ID)
		}
		if err := g.Selection.validate(); err != nil {
			return fmt.Errorf("group %d: %w", g.ID, err)
		}
	}
	for i, bk := range g.Buckets {
		if errs := validateActions(bk.Actions); len(errs) > 0 {
			return fmt.Errorf("group %d bucket %d: %w", g.ID, i, errors.Join(errs...))
		}
		for _, a := range bk.Actions {
			switch a.(type) {
			case *ActCT, *ActGroup, *ActLearn, *ActConjunction:
				return fmt.Errorf("group %d bucket %d: %s is not allowed in a bucket", g.ID, i, a)
			}
		}
	}
	return nil
}

// String is the canonical text form ("group_id=1,type=select,bucket=...").
func (g *Group) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group_id=%d,type=%s", g.ID, g.Type)
	if g.Selection != nil {
		b.WriteString("," + g.Selection.text())
	}
	for _, bk := range g.Buckets {
		b.WriteString(",bucket=")
		var parts []string
		if bk.Weight != 0 {
			parts = append(parts, fmt.Sprintf("weight:%d", bk.Weight))
		}
		if bk.WatchPort != 0 {
			parts = append(parts, fmt.Sprintf("watch_port:%d", bk.WatchPort))
		}
		var acts []string
		for _, a := range bk.Actions {
			acts = append(acts, formatAction(a, DefaultPrinter))
		}
		parts = append(parts, "actions="+strings.Join(acts, ","))
		b.WriteString(strings.Join(parts, ","))
	}
	return b.String()
}

// MeterUnit is the rate unit of a meter.
type MeterUnit uint8

const (
	MeterKbps MeterUnit = iota
	MeterPktps
)

// MeterBand is a drop band.
type MeterBand struct {
	Rate  uint32
	Burst uint32
}

// Meter is an OpenFlow meter. ID is local to the plugin (1..MaxLocalMeterID).
type Meter struct {
	ID    uint32
	Unit  MeterUnit
	Bands []MeterBand
}

// MaxLocalMeterID bounds Meter.ID.
const MaxLocalMeterID = 1023

// Validate checks the meter's shape.
func (m *Meter) Validate() error {
	if m.ID == 0 || m.ID > MaxLocalMeterID {
		return fmt.Errorf("meter id %d out of range 1..%d", m.ID, MaxLocalMeterID)
	}
	if m.Unit > MeterPktps {
		return fmt.Errorf("meter %d: unknown unit %d", m.ID, m.Unit)
	}
	if len(m.Bands) == 0 {
		return fmt.Errorf("meter %d: needs at least one band", m.ID)
	}
	return nil
}

// String is the canonical text form ("meter=1,pktps,bands=type=drop rate=100").
func (m *Meter) String() string {
	unit := "kbps"
	if m.Unit == MeterPktps {
		unit = "pktps"
	}
	var bands []string
	for _, b := range m.Bands {
		s := fmt.Sprintf("type=drop rate=%d", b.Rate)
		if b.Burst != 0 {
			s += fmt.Sprintf(" burst_size=%d", b.Burst)
		}
		bands = append(bands, s)
	}
	return fmt.Sprintf("meter=%d,%s,bands=%s", m.ID, unit, strings.Join(bands, ","))
}
