// Package flow is the Switchyard flow model: typed builders for OpenFlow
// matches, actions, groups and meters as a plugin author writes them.
//
// A plugin never names concrete table IDs or register bits. It names its own
// tables (or another plugin's exported table) by name, jumps symbolically
// (NextTable, GotoStage, GotoTable), and uses register Fields by name. The
// host resolves all of that when it arbitrates a Batch, so a plugin's flows
// stay valid when another plugin is loaded later and the layout grows.
//
// Where to start: Flow (flow.go), Match (match.go), the action constructors
// (action.go; ct.go for conntrack and NAT, learn.go for learn), Batch
// (batch.go; DeleteTagged removes a plugin's flows by tag). Every Flow,
// Group and Meter has one canonical text form, the one `ovs-ofctl
// dump-flows` prints, used in logs, errors and test expectations: match
// fields in OVS's print order and names (tp_dst, dl_vlan, nw_tos), actions
// as ovs-ofctl spells them. Unresolved (String), register fields and
// tables print symbolically (reg:name, @next, load:V->reg:name); resolved
// by the host (Printer with register bits, table, group and meter IDs;
// pipeline.Resolved.String) the whole line is exactly ovs-ofctl's, and
// host/ofxlate's tests and itest/host's live test hold it to that.
//
// Each action is its own type (ActOutput, ActCT, ActLearn, ...) behind the
// sealed Action interface, carrying only the parameters its kind has. IP
// shorthands name their version: TCP4/TCP6, UDP4/UDP6, SCTP4/SCTP6,
// ICMP4/ICMP6, or L4(v, proto); TCP(), UDP() and ICMP() are deprecated
// aliases of the IPv4 forms.
//
// # Adding an action
//
// An action crosses six layers; each step below names the test that fails
// when it is missed.
//
//  1. flow: the Act* type with isAction, Validate, Format (ovs-ofctl's
//     text when resolved) and String, and a constructor. If it carries a
//     jump, return it from JumpOf; if it uses register fields, list them
//     in appendActionFields (flow.go).
//  2. flow/flowtest: a sample in Actions. TestEveryActionTypeHasASample
//     parses this package and fails for an Act* type without one; every
//     later layer's test iterates the samples.
//  3. proto: an ActionKind value in sdk/internal/wirepb/plugin.proto and
//     its parameters (new fields numbered from 20 up), then `make proto`.
//     TestEveryWireKind (fromproto) fails for a sample whose kind is
//     ACTION_UNKNOWN or shared, and for an enum value no sample uses.
//  4. toproto.Action and fromproto.Action: the case for the type and kind.
//     TestBatchRoundTrip (fromproto) fails when the round trip loses it.
//  5. fastwire: appendAction and decoder.action (a slab for the type), or
//     let rare nested actions fall back to the generated code as learn
//     does. TestAgreesWithGeneratedCode fails when either side differs;
//     FuzzDecode then covers the decoder through the seed it builds.
//  6. host/ofxlate: the case in Context.action, translating to
//     host/openflow types (add to host/openflow first if the codec lacks
//     the action; see its doc.go). TestEveryActionTranslates fails for an
//     untranslated type and when the resolved text differs from the
//     codec's ovs-ofctl text. If the action carries a jump,
//     pipeline.Arbiter.Resolve must resolve it (Resolved.Jumps).
//  7. host/ofxlate reverse.go: the case in Reverse.FromActions (and
//     Reverse.operand for a new operand), turning the host/openflow type
//     read from the switch back into the Act* type. TestEveryActionReverses
//     and TestEveryBucketActionReverses fail for a sample that does not
//     come back, through a flow stats or group desc reply, as a flow that
//     resolves to the same switch flow and text.
//  8. A live check: add the action to TestVocabularyOnLiveSwitch
//     (itest/host), which installs it through the agent, compares
//     ovs-ofctl dump-flows with the host's text and reads it back with
//     Host.Flows.
//
// Adding a match kind is the same walk: a MatchKind constant at the end
// (kinds are wire numbers), its kindInfo, a builder, a flowtest.Matches
// sample (TestEveryMatchKindHasASample), the ofxlate matchFields entry
// (TestEveryMatchTranslates; the same entry serves the way back,
// TestEveryMatchReverses), and the live test.
package flow
