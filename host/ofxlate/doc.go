// Package ofxlate translates resolved SDK flows, groups and meters (package
// pipeline / flowstore) into OpenFlow 1.5 messages of package
// host/openflow, and back (reverse.go: a flow read from the switch into the
// owning plugin's terms, for Host.Flows and FLOW_REMOVED). It is the only
// place that knows both models; the forward mapping is one type switch over
// the flow.Act* types (Context.action) and one table of match kinds
// (matchFields), so adding a match field or action means adding a case here,
// in both directions. TestEveryActionTranslates and TestEveryMatchTranslates
// iterate sdk/flow/flowtest's samples, so a type or kind without a case
// fails there, as does one whose resolved text is not the codec's ovs-ofctl
// text (see "Adding an action" in sdk/flow). The way back is checked the
// same way: TestEveryActionReverses, TestEveryMatchReverses and
// TestEveryBucketActionReverses send every sample through a flow stats (or
// group desc) reply, reverse it (Reverse.FromFlow, FromGroup) and require
// the same switch flow and text when it is resolved again.
//
// Actions carrying a jump (ct(table=), resubmit, learn) take their table
// IDs from pipeline.Resolved.Jumps, in action order; in group buckets and
// packet-outs, which no flow resolves, Context.Table resolves them (a
// table the plugin may write).
package ofxlate
