package openflow

// Every concrete action, instruction and message implements its interface.
var (
	_ Action = Output{}
	_ Action = Group{}
	_ Action = SetField{}
	_ Action = PushVLAN{}
	_ Action = PopVLAN{}
	_ Action = DecTTL{}
	_ Action = Meter{}
	_ Action = Resubmit{}
	_ Action = Move{}
	_ Action = OutputReg{}
	_ Action = Conjunction{}
	_ Action = Note{}
	_ Action = CTClear{}
	_ Action = CT{}
	_ Action = (*NAT)(nil)
	_ Action = Controller{}
	_ Action = Learn{}

	_ Instruction = ApplyActions{}
	_ Instruction = WriteActions{}
	_ Instruction = ClearActions{}
	_ Instruction = GotoTable{}
	_ Instruction = WriteMetadata{}

	_ Message = (*Hello)(nil)
	_ Message = (*ErrorMsg)(nil)
	_ Message = (*EchoRequest)(nil)
	_ Message = (*EchoReply)(nil)
	_ Message = (*FeaturesRequest)(nil)
	_ Message = (*FeaturesReply)(nil)
	_ Message = (*GetConfigRequest)(nil)
	_ Message = (*GetConfigReply)(nil)
	_ Message = (*SetConfig)(nil)
	_ Message = (*BarrierRequest)(nil)
	_ Message = (*BarrierReply)(nil)
	_ Message = (*FlowMod)(nil)
	_ Message = (*GroupMod)(nil)
	_ Message = (*MeterMod)(nil)
	_ Message = (*BundleControl)(nil)
	_ Message = (*BundleAdd)(nil)
	_ Message = (*FlowStatsRequest)(nil)
	_ Message = (*FlowStatsReply)(nil)
	_ Message = (*PortDescRequest)(nil)
	_ Message = (*PortDescReply)(nil)
	_ Message = (*GroupDescRequest)(nil)
	_ Message = (*GroupDescReply)(nil)
	_ Message = (*MeterStatsRequest)(nil)
	_ Message = (*MeterStatsReply)(nil)
	_ Message = (*MultipartUnknown)(nil)
	_ Message = (*PacketIn)(nil)
	_ Message = (*PacketOut)(nil)
	_ Message = (*Resume)(nil)
	_ Message = (*PortStatus)(nil)
	_ Message = (*RoleRequest)(nil)
	_ Message = (*RoleReply)(nil)
	_ Message = (*SetAsync)(nil)
	_ Message = (*SetControllerID)(nil)
	_ Message = (*SetPacketInFormat)(nil)
	_ Message = (*Experimenter)(nil)
	_ Message = (*Unknown)(nil)

	_ error = ErrorCode{}
	_ error = (*SwitchError)(nil)
	_ error = (*DecodeError)(nil)
)
