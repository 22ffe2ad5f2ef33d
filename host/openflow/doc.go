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
//   - text.go: the canonical text form. Flow.String() is exactly the line
//     `ovs-ofctl --no-stats dump-flows` prints, e.g.
//     "cookie=0x5, table=3, priority=100,ip,nw_src=10.0.0.1 actions=ct(commit,zone=5),goto_table:4".
//   - message.go: Message, AppendMessage, DecodeMessage; other messages
//     live in bundle.go, group.go, multipart.go, packet.go, nicira.go.
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
// code as OVS prints them (e.g. OFPBAC_BAD_OUT_PORT) and the xid of the
// failing request; errors.Is(err, openflow.ErrCodeBadOutPort) works.
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
