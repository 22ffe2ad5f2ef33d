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
// (action.go), Batch (batch.go; DeleteTagged removes a plugin's flows by
// tag). Every Flow, Group and Meter has one canonical
// text form (String), close to what `ovs-ofctl dump-flows` prints, used in
// logs, errors and test expectations.
package flow
