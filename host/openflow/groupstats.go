package openflow

// mpGroupStats is OFPMP_GROUP_STATS.
const mpGroupStats uint16 = 6

// GroupStatsRequest asks for group counters (GroupAll: every group).
type GroupStatsRequest struct{ GroupID uint32 }

func (m *GroupStatsRequest) msgType() uint8 { return typeMultipartReq }
func (m *GroupStatsRequest) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpGroupStats, 0)
	b = put32(b, m.GroupID)
	return zeros(b, 4), nil
}

// GroupStats is the counters of one group (ofp_group_stats):
//
//	length u16 | pad 2 | group_id u32 | ref_count u32 | pad 4
//	packet_count u64 | byte_count u64 | duration_sec u32 | duration_nsec u32
//	bucket_stats: {packet_count u64, byte_count u64} per bucket
type GroupStats struct {
	GroupID      uint32
	RefCount     uint32
	PacketCount  uint64
	ByteCount    uint64
	DurationSec  uint32
	DurationNsec uint32
	Buckets      []BucketStats
}

// BucketStats counts what one bucket of a group handled.
type BucketStats struct{ PacketCount, ByteCount uint64 }

// GroupStatsReply is one part of the answer to GroupStatsRequest; Conn
// joins the parts.
type GroupStatsReply struct {
	Flags  uint16
	Groups []GroupStats
}

func (m *GroupStatsReply) msgType() uint8 { return typeMultipartReply }
func (m *GroupStatsReply) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpGroupStats, m.Flags)
	for _, g := range m.Groups {
		b = put16(b, uint16(40+16*len(g.Buckets)))
		b = zeros(b, 2)
		b = put32(b, g.GroupID)
		b = put32(b, g.RefCount)
		b = zeros(b, 4)
		b = put64(b, g.PacketCount)
		b = put64(b, g.ByteCount)
		b = put32(b, g.DurationSec)
		b = put32(b, g.DurationNsec)
		for _, bs := range g.Buckets {
			b = put64(b, bs.PacketCount)
			b = put64(b, bs.ByteCount)
		}
	}
	return b, nil
}

func decodeGroupStatsReply(r *reader, flags uint16) (*GroupStatsReply, error) {
	m := &GroupStatsReply{Flags: flags}
	for r.left() > 0 {
		start := r.off
		n := int(r.u16())
		if r.err == nil && (n < 40 || n > len(r.b)-start || (n-40)%16 != 0) {
			r.failf(ErrBadLength, "group stats")
			return nil, r.err
		}
		r.skip(2)
		g := GroupStats{GroupID: r.u32(), RefCount: r.u32()}
		r.skip(4)
		g.PacketCount, g.ByteCount = r.u64(), r.u64()
		g.DurationSec, g.DurationNsec = r.u32(), r.u32()
		for range (n - 40) / 16 {
			g.Buckets = append(g.Buckets, BucketStats{PacketCount: r.u64(), ByteCount: r.u64()})
		}
		if r.err != nil {
			return nil, r.err
		}
		m.Groups = append(m.Groups, g)
	}
	return m, r.err
}
