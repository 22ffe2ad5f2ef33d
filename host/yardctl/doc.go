// Package yardctl is the operator's command line for a Switchyard node:
// it talks to switchyard-agent's local API socket (agent.sock) and shows
// the plugins, the table layout and who owns each table, each plugin's
// flows, the shared resources, the agent's readiness, and traces a packet
// through the pipeline, naming at every hop the plugin that decided.
// `yardctl agents` reads every node's NodeAgent through the apiserver.
//
// Output is a table by default; -o json and -o yaml print the agent's
// answer for scripts. Exit codes: 0 success, 1 error, 2 bad usage,
// 3 the agent is not reachable, 4 a trace ended with the packet dropped
// (or not delivered anywhere).
//
// A trace is computed by the agent from br-int's flows and, unless
// --inject=false, confirmed with a real marked packet that the agent stops
// where the trace ends (it reaches no pod).
//
// Cross-node traces: when the packet leaves through the tunnel toward
// node N, the trace continues on N's agent if its socket is given with
// --peer N=/path/to/agent.sock; otherwise the output says where to run
// the rest. (Agents do not yet reach each other; a Traceflow object
// reconciled by every node's agent is the next step.)
//
// Where to start: NewCommand.
package yardctl
