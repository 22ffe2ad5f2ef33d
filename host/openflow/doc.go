// Package openflow is Switchyard's own OpenFlow 1.5 client for Open
// vSwitch: the wire codec, the canonical text form of flows, and a
// connection (Conn) to ovs-vswitchd. Nothing here shells out to ovs-ofctl;
// ovs-ofctl is only the independent witness in tests.
//
// # Where to start
//
//   - flow.go: Flow, FlowMod, instructions. A flow is plain data:
//     openflow.Flow{Table: 3, Priority: 100, Cookie: c,
//     Match: openflow.Match{openflow.EthType(0x0800), openflow.Prefix(openflow.FieldIPv4Src, p)},
//     Instructions: []openflow.Instruction{openflow.Apply(openflow.CT{Commit: true, Zone: 5}), openflow.Goto(4)}}
//   - field.go / match.go: the field table (every OXM/NXM field we know),
//     MatchField and its constructors (Exact, Masked, Prefix, Addr, MAC, ...).
//   - action.go, learn.go: actions, including the Nicira extensions.
//   - group.go, selection.go: group and meter mods; a select group's
//     selection method (hash on chosen fields, dp_hash) is OVS's
//     NTRT_SELECTION_METHOD group property.
//   - text.go: the canonical text form. Flow.String() is exactly the line
//     `ovs-ofctl --no-stats dump-flows` prints, e.g.
//     "cookie=0x5, table=3, priority=100,ip,nw_src=10.0.0.1 actions=ct(commit,zone=5),goto_table:4".
//   - message.go: Message, AppendMessage, DecodeMessage; other messages
//     live in bundle.go, group.go, multipart.go, groupstats.go,
//     flowremoved.go, packet.go, nicira.go.
//   - conn.go: Conn, the switch connection.
//
// # Design
//
// The codec follows golang.org/x/net/dns/dnsmessage in spirit: encoding
// appends to a caller-supplied buffer (AppendMessage) so a batch of flow
// mods is encoded into one reused buffer with no allocation per flow;
// decoding walks the bytes with a reader that keeps a sticky error and
// reports the structure and offset that were bad (*DecodeError wrapping a
// sentinel such as ErrShortMessage). Everything that is encoded can be
// decoded back into the same typed values; decoded matches are in
// Match.Normalize form (xxreg split into regs, sorted, masks applied),
// which is also how OVS reports them.
//
// Switch errors (OFPT_ERROR) become *SwitchError naming the type and
// code as OVS prints them (e.g. OFPBAC_BAD_OUT_PORT, or for Nicira
// extension errors NXBAC_BAD_CONJUNCTION) and the xid of the failing
// request; errors.Is(err, openflow.ErrCodeBadOutPort) works.
//
// # Connection
//
//	c, err := openflow.Dial(ctx, "unix", "/var/run/openvswitch/br-int.mgmt",
//		openflow.Options{AsyncEvents: true})
//	err = c.BundleFlows(ctx, []openflow.FlowMod{openflow.AddFlow(f)}, true) // atomic
//	flows, err := c.DumpFlows(ctx, openflow.FlowStatsRequest{Table: openflow.TableAll})
//	_, err = c.Request(ctx, &openflow.GroupMod{...}) // waits for a barrier; returns *SwitchError
//	for ev := range c.Events() { ... }              // EventConnected{Reconnect} => replay flows
//
// Requests are pipelined and matched to replies by xid; a request
// without a reply of its own is followed by a barrier so its caller
// learns its fate. Conn reconnects with backoff and reports every
// (re)connection; ovs-vswitchd loses all flows when it restarts, so the
// owner replays its flows on EventConnected with Reconnect set.
//
// # OVS behaviour the code relies on (found against OVS 3.1)
//
//   - OVS rejects a bad message at BUNDLE_ADD time but keeps the bundle
//     open; committing would apply the rest. Bundle therefore sends a
//     barrier after the adds and discards instead of committing when any
//     add failed. Errors found at commit (e.g. OFPFMFC_OVERLAP) roll the
//     whole bundle back and come with the failing message's xid, which
//     Bundle maps to SwitchError.Index.
//   - In OpenFlow 1.5 OVS refuses NXAST_REG_MOVE: move is OFPAT_COPY_FIELD.
//   - Flow stats and packet-in metadata report registers as OpenFlow 1.5
//     packet registers (xreg, class 0x8001); the decoder splits them into
//     reg fields.
//   - ct_nw_src/dst, ct_ipv6_*, ct_nw_proto and ct_tp_* need
//     ct_state=-inv+trk in the match (Match.Validate checks this).
//   - On the bridge .mgmt socket (a service connection) OVS 3.1 sends
//     OF1.5 packet-ins and port status even without SET_ASYNC, but only
//     NXT_PACKET_IN2 carries controller userdata: Options.AsyncEvents
//     selects that format and sets the async mask explicitly.
//   - controller(id=N) reaches only connections that set controller id N
//     (Options.ControllerID); id 0 is the default.
//   - OFPT_FLOW_REMOVED comes only for flows with FlagSendFlowRem and only
//     when SET_ASYNC enables its reasons; AsyncEvents enables the idle
//     and hard timeouts (Conn reports them as EventFlowRemoved).
//   - Flow, group and meter counters lag the userspace datapath: the
//     revalidators update them, so a reader waits for them to catch up.
//
// # How to add a match field
//
//  1. Add a Field constant in field.go at the position that keeps its
//     prerequisites (eth_type, ip_proto) before it.
//  2. Add its row to the fields table: OVS name (ovs-fields(7)), NXM/OXM
//     name, class, code, size, maskable, text kind, prerequisites.
//     If OVS also accepts an older NXM header for it, add an alias.
//  3. If match_format prints it, add it to Match.AppendText in text.go at
//     the place lib/match.c prints it.
//  4. Add a golden case in golden_flow_test.go (and a set_field case in
//     golden_action_test.go if it is settable) and run go test.
//
// # How to add an action
//
//  1. Define a type with appendAction (wire form; use beginAction or
//     beginNX and endAction), appendText (the exact ovs-ofctl syntax) and
//     String.
//  2. Decode it in actiondecode.go (decodeAction or decodeNX).
//  3. Add golden cases (encode -> ovs-ofctl ofp-print -> expected text)
//     and let the fuzz round trip cover it.
package openflow
