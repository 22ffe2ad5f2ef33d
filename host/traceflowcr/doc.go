// Package traceflowcr serves the Traceflow object (crd.switchyard.dev) on
// one node: the agent of the source pod's node starts the trace, each node
// the packet tunnels to continues it from the hand-off in the status, and
// the starting agent fails a trace whose next node stays silent past the
// timeout. The trace itself is the agent's (host/agent Trace, confirmed by
// a marked packet); this package only turns objects into trace requests and
// results into status.
//
// Agents coordinate through the object alone: every write is an
// UpdateStatus at the resourceVersion the agent read, so two agents never
// both extend the same trace.
package traceflowcr
