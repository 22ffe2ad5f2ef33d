// Package traceflow follows one packet through the agent's OpenFlow
// pipeline, table by table, the way ovs-vswitchd's classifier would:
// highest-priority match per table (conjunctive matches included), then
// the flow's actions (set_field, move, resubmit, goto_table, ct, group,
// output…) on a model of the packet and its metadata.
//
// The flows it walks are the switch's own, dumped over OpenFlow by the
// agent (never ovs-appctl): what it reports is what br-int holds, and each
// hop names the table, the plugin owning the table and the plugin whose
// flow matched (by cookie). The agent turns the result into a verdict
// (delivered, dropped by plugin P in table T, sent to the tunnel toward
// node N) in host/agent/trace.go.
//
// What it models, and what it does not: it is a tracer, not a datapath.
// Connection tracking is modelled as a first packet: after ct(table=N)
// the packet continues in N with ct_state=+trk+new (and the zone set);
// NAT is not applied; learn actions are reported, not executed; a select
// group takes its first live bucket (ovs-vswitchd picks by hash). The
// walk sends nothing; Packet.Frame builds the packet's bytes for the
// agent's datapath confirmation (host/agent/inject.go), which sends it
// marked and stops it where the walk ended.
//
// Where to start: Run.
package traceflow
