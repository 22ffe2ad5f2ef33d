package openflow

// GroupType is OFPGT_*.
type GroupType uint8

const (
	GroupTypeAll          GroupType = 0
	GroupTypeSelect       GroupType = 1
	GroupTypeIndirect     GroupType = 2
	GroupTypeFastFailover GroupType = 3
)

// GroupCommand is OFPGC_*.
type GroupCommand uint16

const (
	GroupAdd    GroupCommand = 0
	GroupModify GroupCommand = 1
	GroupDelete GroupCommand = 2
)

// Bucket is one bucket of a group. Weight is used by select groups,
// WatchPort/WatchGroup by fast-failover groups (0 means none).
type Bucket struct {
	ID         uint32
	Weight     uint16
	WatchPort  uint32
	WatchGroup uint32
	Actions    []Action
}

var groupCmdNames = [...]string{"ADD", "MOD", "DEL"}

func (c GroupCommand) String() string {
	if int(c) < len(groupCmdNames) {
		return groupCmdNames[c]
	}
	return "cmd" + string(appendUint(nil, uint64(c)))
}

// GroupMod adds, modifies or deletes a group. Bucket IDs are assigned
// 0..n-1 when all are zero.
type GroupMod struct {
	Command GroupCommand
	Type    GroupType
	GroupID uint32
	Buckets []Bucket
	// Selection, for select groups, is the selection method property.
	Selection *GroupSelection
}

func (m *GroupMod) msgType() uint8 { return typeGroupMod }
func (m *GroupMod) appendBody(b []byte) ([]byte, error) {
	b = put16(b, uint16(m.Command))
	b = put8(b, uint8(m.Type))
	b = put8(b, 0)
	b = put32(b, m.GroupID)
	bl := len(b)
	b = put16(b, 0)
	b = zeros(b, 2)
	b = put32(b, 0xffffffff) // command_bucket_id: OFPG15_BUCKET_ALL
	bs := len(b)
	b, err := appendBuckets(b, m.Buckets)
	if err != nil {
		return b, err
	}
	setLen16(b, bl, len(b)-bs)
	return appendGroupProps(b, m.Selection)
}

func appendBuckets(b []byte, buckets []Bucket) ([]byte, error) {
	auto := true
	for _, bk := range buckets {
		if bk.ID != 0 {
			auto = false
		}
	}
	for i, bk := range buckets {
		start := len(b)
		b = put16(b, 0)
		b = put16(b, 0)
		id := bk.ID
		if auto {
			id = uint32(i)
		}
		b = put32(b, id)
		as := len(b)
		var err error
		b, err = appendActionList(b, bk.Actions)
		if err != nil {
			return b, err
		}
		setLen16(b, start+2, len(b)-as)
		if bk.Weight != 0 {
			b = put16(b, 0)
			b = put16(b, 8)
			b = put16(b, bk.Weight)
			b = zeros(b, 2)
		}
		if bk.WatchPort != 0 {
			b = put16(b, 1)
			b = put16(b, 8)
			b = put32(b, bk.WatchPort)
		}
		if bk.WatchGroup != 0 {
			b = put16(b, 2)
			b = put16(b, 8)
			b = put32(b, bk.WatchGroup)
		}
		setLen16(b, start, len(b)-start)
	}
	return b, nil
}

func decodeBuckets(r *reader) ([]Bucket, error) {
	var out []Bucket
	for r.left() > 0 {
		start := r.off
		n := int(r.u16())
		al := int(r.u16())
		if r.err == nil && (n < 8 || n > len(r.b)-start || al > n-8) {
			r.failf(ErrBadLength, "bucket")
			return nil, r.err
		}
		bk := Bucket{ID: r.u32()}
		var err error
		ar := r.sub(al, "bucket actions")
		if bk.Actions, err = decodeActions(&ar); err != nil {
			return nil, err
		}
		props := r.sub(n-8-al, "bucket properties")
		for props.left() >= 4 {
			typ := props.u16()
			pl := int(props.u16())
			if pl < 4 {
				props.failf(ErrBadLength, "bucket property")
				break
			}
			v := props.sub(pl-4, "bucket property")
			switch typ {
			case 0:
				bk.Weight = v.u16()
			case 1:
				bk.WatchPort = v.u32()
			case 2:
				bk.WatchGroup = v.u32()
			}
			if bk.WatchPort == PortAny {
				bk.WatchPort = 0
			}
			if bk.WatchGroup == 0xffffffff {
				bk.WatchGroup = 0
			}
		}
		if props.err != nil {
			return nil, props.err
		}
		out = append(out, bk)
	}
	return out, r.err
}

func decodeGroupMod(r *reader) (*GroupMod, error) {
	m := &GroupMod{Command: GroupCommand(r.u16()), Type: GroupType(r.u8())}
	r.skip(1)
	m.GroupID = r.u32()
	bl := int(r.u16())
	r.skip(6)
	var err error
	br := r.sub(bl, "buckets")
	if m.Buckets, err = decodeBuckets(&br); err != nil {
		return nil, err
	}
	m.Selection = decodeGroupProps(r)
	return m, r.err
}

// MeterCommand is OFPMC_*.
type MeterCommand uint16

const (
	MeterAdd    MeterCommand = 0
	MeterModify MeterCommand = 1
	MeterDelete MeterCommand = 2
)

// Meter flags.
const (
	MeterKbps      uint16 = 1
	MeterPktps     uint16 = 2
	MeterBurst     uint16 = 4
	MeterFlagStats uint16 = 8
)

// MeterBand is a drop (Type 1) or DSCP remark (Type 2) band.
type MeterBand struct {
	Type      uint16
	Rate      uint32
	BurstSize uint32
	PrecLevel uint8 // DSCP remark only
}

// MeterMod adds, modifies or deletes a meter.
type MeterMod struct {
	Command MeterCommand
	Flags   uint16
	MeterID uint32
	Bands   []MeterBand
}

func (m *MeterMod) msgType() uint8 { return typeMeterMod }
func (m *MeterMod) appendBody(b []byte) ([]byte, error) {
	b = put16(b, uint16(m.Command))
	b = put16(b, m.Flags)
	b = put32(b, m.MeterID)
	for _, bd := range m.Bands {
		b = put16(b, bd.Type)
		b = put16(b, 16)
		b = put32(b, bd.Rate)
		b = put32(b, bd.BurstSize)
		b = put8(b, bd.PrecLevel)
		b = zeros(b, 3)
	}
	return b, nil
}

func decodeMeterMod(r *reader) (*MeterMod, error) {
	m := &MeterMod{Command: MeterCommand(r.u16()), Flags: r.u16(), MeterID: r.u32()}
	for r.left() > 0 {
		bd := MeterBand{Type: r.u16()}
		if n := r.u16(); n != 16 && r.err == nil {
			r.failf(ErrBadLength, "meter band")
			return nil, r.err
		}
		bd.Rate, bd.BurstSize = r.u32(), r.u32()
		bd.PrecLevel = r.u8()
		r.skip(3)
		if bd.Type != 2 {
			bd.PrecLevel = 0
		}
		m.Bands = append(m.Bands, bd)
	}
	return m, r.err
}

var groupTypeNames = [...]string{"all", "select", "indirect", "ff"}

func (t GroupType) String() string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return "type" + string(appendUint(nil, uint64(t)))
}

// AppendText appends the group as ovs-ofctl dump-groups prints it, e.g.
// "group_id=5,type=select,bucket=bucket_id:0,weight:100,actions=output:1".
func (g *GroupDesc) AppendText(b []byte) []byte {
	b = appendUint(append(b, "group_id="...), uint64(g.GroupID))
	b = append(append(b, ",type="...), g.Type.String()...)
	if g.Selection != nil {
		b = g.Selection.appendText(b)
	}
	auto := true
	for _, bk := range g.Buckets {
		if bk.ID != 0 {
			auto = false
		}
	}
	for i, bk := range g.Buckets {
		id := bk.ID
		if auto {
			id = uint32(i)
		}
		b = appendUint(append(b, ",bucket=bucket_id:"...), uint64(id))
		// OVS prints a weight that differs from its type's default: 1
		// for select groups, 0 for the others.
		if bk.Weight != defaultWeight(g.Type) {
			b = appendUint(append(b, ",weight:"...), uint64(bk.Weight))
		}
		if bk.WatchPort != 0 {
			b = appendPort(append(b, ",watch_port:"...), bk.WatchPort)
		}
		if bk.WatchGroup != 0 {
			b = appendUint(append(b, ",watch_group:"...), uint64(bk.WatchGroup))
		}
		b = append(b, ",actions="...)
		if len(bk.Actions) == 0 {
			b = append(b, "drop"...)
		} else {
			b = appendActions(b, bk.Actions)
		}
	}
	return b
}

func (g *GroupDesc) String() string { return string(g.AppendText(nil)) }

func defaultWeight(t GroupType) uint16 {
	if t == GroupTypeSelect {
		return 1
	}
	return 0
}
