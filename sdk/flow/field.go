package flow

import "fmt"

// Field names a register field: a run of bits a plugin uses to carry state
// between tables. A plugin asks for fields by name and width in its
// description; the host allocates the concrete register bits, so no two
// plugins can collide. The well-known fields below are shared by everyone.
type Field struct {
	// Name is unique within the plugin (well-known fields start with "sdk.").
	Name string
	// Width in bits, 1..32. A field never spans two registers.
	Width uint8
}

func (f Field) String() string { return fmt.Sprintf("%s[%d]", f.Name, f.Width) }

// Validate says what is wrong with a field request, if anything.
func (f Field) Validate() error {
	if f.Name == "" {
		return fmt.Errorf("register field has an empty name")
	}
	if f.Width < 1 || f.Width > 32 {
		return fmt.Errorf("register field %q: width %d out of range, want 1..32", f.Name, f.Width)
	}
	return nil
}

// Bits is a concrete register slice: reg<Reg>[Offset .. Offset+Width-1].
type Bits struct {
	Reg    uint8 // 0..15 (OVS NXM_NX_REG<n>)
	Offset uint8
	Width  uint8
}

func (b Bits) String() string {
	if b.Offset == 0 && b.Width == 32 {
		return fmt.Sprintf("reg%d", b.Reg)
	}
	return fmt.Sprintf("reg%d[%d..%d]", b.Reg, b.Offset, b.Offset+b.Width-1)
}

// Mask is the 32-bit register mask covering b.
func (b Bits) Mask() uint32 {
	if b.Width >= 32 {
		return 0xffffffff
	}
	return ((uint32(1) << b.Width) - 1) << b.Offset
}

// Well-known fields. Their bits are fixed by the SDK (WellKnownBits) so every
// plugin and the host agree without negotiation.
var (
	// FieldPacketSource says where a packet entered the node (PacketSource*).
	// Written by the classifier, read by every later stage.
	FieldPacketSource = Field{Name: "sdk.pkt_source", Width: 4}
	// FieldOutputReady is set to 1 once FieldTargetPort holds the output port.
	FieldOutputReady = Field{Name: "sdk.output_ready", Width: 1}
	// FieldTargetPort is the OpenFlow port the Output stage sends the packet to.
	FieldTargetPort = Field{Name: "sdk.target_ofport", Width: 32}
)

// Values of FieldPacketSource.
const (
	PacketSourceUnknown uint32 = 0
	PacketSourceLocal   uint32 = 1 // a pod on this node
	PacketSourceGateway uint32 = 2 // the node's gateway port
	PacketSourceTunnel  uint32 = 3 // an overlay tunnel
	PacketSourceUplink  uint32 = 4 // the physical uplink
)

// WellKnownBits is where the well-known fields live. The host never hands
// these bits to a plugin request.
func WellKnownBits() map[string]Bits {
	return map[string]Bits{
		FieldPacketSource.Name: {Reg: 0, Offset: 0, Width: 4},
		FieldOutputReady.Name:  {Reg: 0, Offset: 4, Width: 1},
		FieldTargetPort.Name:   {Reg: 1, Offset: 0, Width: 32},
	}
}

// WellKnownFields lists the well-known fields.
func WellKnownFields() []Field {
	return []Field{FieldPacketSource, FieldOutputReady, FieldTargetPort}
}
