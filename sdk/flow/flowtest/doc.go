// Package flowtest holds one value of every flow action type and every
// match kind, for tests of code that handles them all: the wire codecs
// (sdk/internal), the host's translation (host/ofxlate) and live checks
// against a real switch. Its own test fails when an Act* type of package
// flow has no sample here, which is how "Adding an action" (flow's doc.go)
// catches a missing step.
package flowtest
