package openflow

import "strconv"

// FlowRemovedReason says why the switch removed a flow (OFPRR_*).
type FlowRemovedReason uint8

const (
	RemovedIdleTimeout FlowRemovedReason = 0
	RemovedHardTimeout FlowRemovedReason = 1
	RemovedDelete      FlowRemovedReason = 2
	RemovedGroupDelete FlowRemovedReason = 3
	RemovedMeterDelete FlowRemovedReason = 4
	RemovedEviction    FlowRemovedReason = 5
)

var removedReasonNames = [...]string{"idle", "hard", "delete", "group_delete", "meter_delete", "eviction"}

func (r FlowRemovedReason) String() string {
	if int(r) < len(removedReasonNames) {
		return removedReasonNames[r]
	}
	return "reason" + strconv.Itoa(int(r))
}

// Timeout says the switch removed the flow on its own (idle or hard
// timeout), not because a controller deleted it.
func (r FlowRemovedReason) Timeout() bool {
	return r == RemovedIdleTimeout || r == RemovedHardTimeout
}

// FlowRemoved is OFPT_FLOW_REMOVED: the switch removed a flow that had
// FlagSendFlowRem set. Flow carries table, priority, cookie, timeouts and
// match (no instructions); the counters are the flow's last ones.
//
// OpenFlow 1.5 layout after the header:
//
//	table_id u8 | reason u8 | priority u16 | idle u16 | hard u16 | cookie u64
//	ofp_match (padded to 8) | ofp_stats (OXS duration, packet and byte count)
type FlowRemoved struct {
	Reason       FlowRemovedReason
	Flow         Flow
	DurationSec  uint32
	DurationNsec uint32
	PacketCount  uint64
	ByteCount    uint64
}

func (m *FlowRemoved) msgType() uint8 { return typeFlowRemoved }
func (m *FlowRemoved) appendBody(b []byte) ([]byte, error) {
	f := &m.Flow
	b = put8(b, f.Table)
	b = put8(b, uint8(m.Reason))
	b = put16(b, f.Priority)
	b = put16(b, f.IdleTimeout)
	b = put16(b, f.HardTimeout)
	b = put64(b, f.Cookie)
	b = appendMatch(b, f.Match)
	return appendStats(b, m.DurationSec, m.DurationNsec, m.PacketCount, m.ByteCount), nil
}

func decodeFlowRemoved(r *reader) (*FlowRemoved, error) {
	m := &FlowRemoved{}
	f := &m.Flow
	f.Table = r.u8()
	m.Reason = FlowRemovedReason(r.u8())
	f.Priority = r.u16()
	f.IdleTimeout = r.u16()
	f.HardTimeout = r.u16()
	f.Cookie = r.u64()
	if r.err != nil {
		return nil, r.err
	}
	var err error
	if f.Match, err = decodeMatch(r); err != nil {
		return nil, err
	}
	if m.DurationSec, m.DurationNsec, m.PacketCount, m.ByteCount, err = decodeStats(r); err != nil {
		return nil, err
	}
	return m, r.err
}

// appendStats appends an ofp_stats holding OXS duration, packet count and
// byte count, padded to 8 bytes.
func appendStats(b []byte, sec, nsec uint32, packets, bytes uint64) []byte {
	st := len(b)
	b = put16(b, 0)
	b = put16(b, 0)
	b = put32(b, 0x80020008) // OXS_OF_DURATION
	b = put32(b, sec)
	b = put32(b, nsec)
	b = put32(b, 0x80020808) // OXS_OF_PACKET_COUNT
	b = put64(b, packets)
	b = put32(b, 0x80020a08) // OXS_OF_BYTE_COUNT
	b = put64(b, bytes)
	setLen16(b, st+2, len(b)-st)
	return pad8(b, st)
}

// decodeStats reads an ofp_stats and its padding, keeping the OXS fields
// it knows and skipping the others.
func decodeStats(s *reader) (sec, nsec uint32, packets, bytes uint64, err error) {
	sst := s.off
	s.skip(2)
	sl := int(s.u16())
	if s.err == nil && sl < 4 {
		s.failf(ErrBadLength, "ofp_stats")
		return 0, 0, 0, 0, s.err
	}
	s.off = sst
	stats := s.sub(sl, "ofp_stats")
	s.skip(min((8-sl%8)%8, s.left()))
	stats.skip(4)
	for stats.left() >= 4 {
		h := stats.u32()
		v := stats.bytes(int(h & 0xff))
		if stats.err != nil {
			break
		}
		if h>>16 != 0x8002 {
			continue
		}
		switch (h >> 9) & 0x7f {
		case 0:
			if len(v) == 8 {
				sec, nsec = uint32(beUint(v[:4])), uint32(beUint(v[4:]))
			}
		case 4:
			packets = beUint(v)
		case 5:
			bytes = beUint(v)
		}
	}
	if stats.err != nil {
		return 0, 0, 0, 0, stats.err
	}
	return sec, nsec, packets, bytes, s.err
}
