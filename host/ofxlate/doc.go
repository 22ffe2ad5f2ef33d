// Package ofxlate translates resolved SDK flows, groups and meters (package
// pipeline / flowstore) into OpenFlow 1.5 messages of package
// host/openflow, and back (reverse.go: a flow read from the switch into the
// owning plugin's terms, for Host.Flows and FLOW_REMOVED). It is the only
// place that knows both models; the mapping is one switch per kind, so
// adding a match field or action means adding a case in both directions
// here and a case to TestReverseRoundTrip.
package ofxlate
