// Package sdk is the public Switchyard plugin SDK.
//
// A feature plugin is a small program whose main is one call:
//
//	func main() { sdk.Serve(&myFeature{}) }
//
// myFeature implements Feature: Describe says which tables (by name, stage
// and pipeline) and register fields it needs; Start receives the host's
// assignment and a Host handle to submit flows with. Optional capability
// interfaces (CNIHandler, PodInterfaceSubscriber, PacketInHandler,
// NodeEventSubscriber) add events; the SDK lists the capabilities for the
// host by checking which of them the type implements.
//
// Every method has the shape (ctx, Request, *Response) error, so fields can
// be added to requests and responses without breaking plugins.
//
// Host.Flows, GroupStats and MeterStats (readback.go) read the plugin's own
// flows, groups and meters back from the switch with their counters, in
// the plugin's terms (table names, named register fields); a plugin can
// confirm what is installed (podnet's CNI CHECK) or report per-rule
// counters. flow.Batch.DeleteTagged removes flows by their tag without
// recomputing them. A packet-in carries the packet's register fields and
// conntrack state (PacketInRequest.Fields, CT); a packet-out can continue
// in one of the plugin's tables (PacketOut.ResumeTable). A
// FlowRemovedHandler hears of flows the switch timed out.
//
// Operability (operability.go): a MetricsReporter hands the host its own
// metrics when Prometheus scrapes the agent (the host adds the plugin
// label); a FlowDescriber says what one of its flows means (e.g. which
// policy and rule a drop flow enforces), so `yardctl trace` can name it.
//
// Everything about the wire — the go-plugin handshake, gRPC and protobuf —
// stays inside this module, under internal/, where authors cannot reach it.
// Flows are built with package flow. The host side of the wire is package
// sdkhost, used only by switchyard-agent.
//
// Where to start: feature.go (what you implement), host.go and readback.go
// (what you call),
// flow/ (how flows are written), and plugins/template in the repository.
package sdk
