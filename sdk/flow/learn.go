package flow

import (
	"errors"
	"fmt"
	"strings"
)

// LearnKind says what a learn spec adds to the learned flow.
type LearnKind uint8

const (
	// LearnMatch adds a match field to the learned flow.
	LearnMatch LearnKind = iota
	// LearnLoad adds a load to the learned flow's actions.
	LearnLoad
	numLearnKinds
)

// LearnSpec is one part of the flow a learn action adds. Dst is the match
// field (LearnMatch) or the field loaded (LearnLoad); the value comes from
// the packet being processed (Src) or is the constant Value when Src is
// the zero Operand. Build specs with the Learn* functions.
type LearnSpec struct {
	Kind  LearnKind
	Dst   Operand
	Src   Operand
	Value uint64
}

// LearnMatchPacket matches dst of later packets against the value dst has
// in this packet (e.g. Header(MatchIPv4Src): the same client).
func LearnMatchPacket(dst Operand) LearnSpec { return LearnSpec{Kind: LearnMatch, Dst: dst, Src: dst} }

// LearnMatchFrom matches dst of later packets against src of this packet
// (e.g. a reply's ipv4_dst against this request's ipv4_src).
func LearnMatchFrom(dst, src Operand) LearnSpec {
	return LearnSpec{Kind: LearnMatch, Dst: dst, Src: src}
}

// LearnMatchValue matches dst against a constant (the EtherType and IP
// protocol that later header matches need).
func LearnMatchValue(dst Operand, v uint64) LearnSpec {
	return LearnSpec{Kind: LearnMatch, Dst: dst, Value: v}
}

// LearnLoadFrom makes the learned flow load this packet's src into dst
// (e.g. the backend chosen for this connection into a register).
func LearnLoadFrom(src, dst Operand) LearnSpec { return LearnSpec{Kind: LearnLoad, Dst: dst, Src: src} }

// LearnLoadValue makes the learned flow load a constant into dst.
func LearnLoadValue(v uint64, dst Operand) LearnSpec {
	return LearnSpec{Kind: LearnLoad, Dst: dst, Value: v}
}

func (s LearnSpec) immediate() bool { return s.Src == (Operand{}) }

func (s LearnSpec) validate() error {
	if s.Kind >= numLearnKinds {
		return fmt.Errorf("unknown learn spec kind %d", s.Kind)
	}
	// A learned match on a header is a read; a learned load writes.
	if err := s.Dst.validate(s.Kind == LearnLoad); err != nil {
		return err
	}
	if s.immediate() {
		if w := s.Dst.Width(); w < 64 && s.Value>>w != 0 {
			return fmt.Errorf("value %#x does not fit %d bits", s.Value, w)
		}
		if s.Dst.Width() > 64 {
			return fmt.Errorf("a constant is at most 64 bits wide, %s has %d", s.Dst.nxmText(DefaultPrinter), s.Dst.Width())
		}
		return nil
	}
	if err := s.Src.validate(false); err != nil {
		return err
	}
	if s.Src.Width() != s.Dst.Width() {
		return fmt.Errorf("source is %d bits but destination is %d bits", s.Src.Width(), s.Dst.Width())
	}
	return nil
}

// text prints the spec as ovs-ofctl does.
func (s LearnSpec) text(p Printer) string {
	switch {
	case s.Kind == LearnMatch && s.immediate():
		if k, ofs, w, ok := s.Dst.Header(); ok && k.Valid() && ofs == 0 && int(w) == k.Size()*8 {
			return matchKinds[k].setName() + "=" + learnValue(k, s.Value)
		}
		return s.Dst.nxmText(p) + "=" + altHex(s.Value)
	case s.Kind == LearnMatch:
		if s.Src == s.Dst {
			return s.Dst.nxmText(p)
		}
		return s.Dst.nxmText(p) + "=" + s.Src.nxmText(p)
	case s.immediate():
		return "load:" + altHex(s.Value) + "->" + s.Dst.nxmText(p)
	}
	return "load:" + s.Src.nxmText(p) + "->" + s.Dst.nxmText(p)
}

// ActLearn adds (or refreshes) a flow in Table each time it runs: the
// building block of session affinity, which pins a client to the backend
// its first packet was sent to. Table is a table the plugin may write (its
// own or an exported one). The learned flow carries the plugin's cookie
// prefix and the tag of the flow that learned it (in a round reserved for
// learned flows, which the host's sweeps after Synced never delete), so
// Host.Flows reads it back under that tag. A zero Priority means OVS's
// default, 32768.
type ActLearn struct {
	Table       string
	Priority    uint16
	IdleTimeout uint16
	HardTimeout uint16
	Specs       []LearnSpec
}

// Learn builds a learn action.
func Learn(l ActLearn) Action { c := l; return &c }

func (*ActLearn) isAction() {}
func (a *ActLearn) Validate() error {
	var errs []error
	if a.Table == "" {
		errs = append(errs, errors.New("learn: no table for the learned flow"))
	}
	if len(a.Specs) == 0 {
		errs = append(errs, errors.New("learn: no specs"))
	}
	for i, s := range a.Specs {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("learn spec %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Format prints as ovs-ofctl does, with the table from p.Jump and the
// cookie the host gives the learned flow (p.Cookie).
func (a *ActLearn) Format(p Printer) string {
	args := []string{"table=" + p.Jump(GotoTable(a.Table))}
	if a.IdleTimeout != 0 {
		args = append(args, fmt.Sprintf("idle_timeout=%d", a.IdleTimeout))
	}
	if a.HardTimeout != 0 {
		args = append(args, fmt.Sprintf("hard_timeout=%d", a.HardTimeout))
	}
	if a.Priority != 0 && a.Priority != 32768 {
		args = append(args, fmt.Sprintf("priority=%d", a.Priority))
	}
	if p.Cookie != 0 {
		args = append(args, fmt.Sprintf("cookie=%#x", p.Cookie))
	}
	for _, s := range a.Specs {
		args = append(args, s.text(p))
	}
	return "learn(" + strings.Join(args, ",") + ")"
}
func (a *ActLearn) String() string { return a.Format(DefaultPrinter) }

// learnValue prints a whole-field constant as OVS's mf_format does.
func learnValue(k MatchKind, v uint64) string {
	if k.Size() > 8 {
		return altHex(v)
	}
	if matchKinds[k].dec {
		return fmt.Sprintf("%d", v)
	}
	f := MatchField{Kind: k, Value: be(k.Size(), v)}
	switch k {
	case MatchIPv4Src, MatchIPv4Dst, MatchEthSrc, MatchEthDst, MatchARPSpa, MatchARPTpa, MatchARPSha, MatchARPTha, MatchTunDst, MatchTunSrc:
		return f.valueString()
	}
	return altHex(v)
}
