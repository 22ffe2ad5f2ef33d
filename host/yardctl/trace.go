package yardctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"switchyard.dev/switchyard/host/agent"
)

// Trace is what `yardctl trace` shows: the trace on each node the packet
// crossed, in order.
type Trace struct {
	Nodes []agent.TraceResult `json:"nodes"`
	// Outcome sums up the last node's verdicts: delivered, dropped,
	// tunnel (the next node was not traced), host, controller, output.
	Outcome string `json:"outcome"`
	// Unfinished says why the trace stops short of the packet's end (a
	// peer not given, or not answering).
	Unfinished string  `json:"unfinished,omitempty"`
	Millis     float64 `json:"millis"`
}

func traceCmd(o *options) *cobra.Command {
	var req agent.TraceRequest
	var peers map[string]string
	cmd := &cobra.Command{
		Use:   "trace --from NAMESPACE/POD --to IP [--protocol tcp --port 80]",
		Short: "Trace a packet from a pod through the pipeline: every table it hits, the plugin that owns it and the flow that matched, and the verdict",
		Example: `  yardctl trace --from default/a-1 --to 10.244.1.5 --port 80
  yardctl trace --from default/a-1 --to 10.244.2.7 --protocol udp --port 53 --peer node-2=/run/node-2/agent.sock`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.SourcePod == "" || (req.DstIP == "" && req.DstPod == "") {
				return &ExitError{ExitUsage, fmt.Errorf("say where the packet starts and goes: --from NAMESPACE/POD and --to IP (or --to-pod NAMESPACE/POD on the same node)")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			t, err := runTrace(ctx, o, req, peers)
			if err != nil {
				return err
			}
			if err := o.print(cmd.OutOrStdout(), t, func(tw *tabwriter.Writer) { traceTable(tw, t) }); err != nil {
				return err
			}
			switch t.Outcome {
			case agent.VerdictDelivered, agent.VerdictHost, agent.VerdictTunnel:
				return nil
			}
			return &ExitError{ExitNotDelivered, fmt.Errorf("the packet was not delivered (%s)", t.Outcome)}
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.SourcePod, "from", "", "source pod (namespace/name) on this node")
	f.StringVar(&req.DstIP, "to", "", "destination IP")
	f.StringVar(&req.DstPod, "to-pod", "", "destination pod (namespace/name) on this node, instead of --to")
	f.StringVar(&req.Protocol, "protocol", "tcp", "tcp, udp, sctp or icmp")
	f.Uint16Var(&req.DstPort, "port", 0, "destination port (tcp, udp, sctp)")
	f.Uint16Var(&req.SrcPort, "src-port", 0, "source port (default 40000)")
	f.BoolVar(&req.Inject, "inject", true, "confirm the computed trace with a real packet, marked and stopped where the trace ends (it reaches no pod)")
	f.StringToStringVar(&peers, "peer", nil, "NODE=SOCKET: the agent socket of another node, to follow the packet there through the tunnel (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("protocol", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"tcp", "udp", "sctp", "icmp"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// maxNodes bounds a trace that bounces between nodes.
const maxNodes = 8

func runTrace(ctx context.Context, o *options, req agent.TraceRequest, peers map[string]string) (*Trace, error) {
	start := time.Now()
	t := &Trace{}
	c := o.client()
	for range maxNodes {
		b, code, err := c.do(ctx, "POST", "/v1/trace", req)
		if err != nil {
			if len(t.Nodes) == 0 {
				return nil, err
			}
			t.Unfinished = fmt.Sprintf("the agent at %s did not answer: %v", c.socket, err)
			break
		}
		if code/100 != 2 {
			msg := strings.TrimSpace(string(b))
			if len(t.Nodes) == 0 {
				exit := ExitFailure
				if code == 400 {
					exit = ExitUsage
				}
				return nil, &ExitError{exit, fmt.Errorf("trace: %s", msg)}
			}
			t.Unfinished = "the next node refused the trace: " + msg
			break
		}
		var r agent.TraceResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("trace: unexpected answer (is yardctl older than the agent?): %v", err)
		}
		t.Nodes = append(t.Nodes, r)
		t.Outcome = agent.Outcome(r.Verdicts)
		next := nextHop(r.Verdicts)
		if next == nil {
			break
		}
		sock, ok := peers[next.Node]
		if !ok {
			t.Unfinished = fmt.Sprintf("the packet went through the tunnel to node %s (%s); give --peer %s=SOCKET to follow it there", dash(next.Node), next.TunnelTo, dash(next.Node))
			break
		}
		inject := req.Inject
		req, c = *next.Next, newClient(sock, o.timeout)
		req.Inject = inject
	}
	t.Millis = float64(time.Since(start).Microseconds()) / 1000
	return t, nil
}

func nextHop(vs []agent.TraceVerdict) *agent.TraceVerdict {
	for i := range vs {
		if vs[i].Kind == agent.VerdictTunnel && vs[i].Next != nil {
			return &vs[i]
		}
	}
	return nil
}

func traceTable(tw *tabwriter.Writer, t *Trace) {
	for i, n := range t.Nodes {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "NODE %s\n", n.Node)
		fmt.Fprintln(tw, "#\tTABLE\tSTAGE\tOWNER\tFLOW BY\tPRIO\tDECISION")
		for j, h := range n.Hops {
			decision := strings.Join(h.Notes, "; ")
			if h.Description != "" {
				decision = strings.TrimPrefix(h.Description+"; "+decision, "; ")
				decision = strings.TrimSuffix(decision, "; ")
			}
			if h.End != "" {
				decision = strings.TrimPrefix(decision+"; "+h.End, "; ")
			}
			by := h.Plugin
			if h.End == "miss" {
				by = "(miss)"
			}
			fmt.Fprintf(tw, "%d\t%s%s(%d)\t%s\t%s\t%s\t%d\t%s\n", j+1, strings.Repeat("  ", h.Depth), h.Table, h.TableID, dash(h.Stage), dash(h.TableOwner), dash(by), h.Priority, dash(decision))
		}
		for _, v := range n.Verdicts {
			fmt.Fprintf(tw, "VERDICT\t%s\n", verdictText(v))
		}
		if d := n.Datapath; d != nil {
			state := "not confirmed"
			if d.Confirmed {
				state = "confirmed"
			}
			if !d.Injected {
				state = "not checked"
			}
			fmt.Fprintf(tw, "DATAPATH\t%s: %s\n", state, d.Message)
		}
	}
	if t.Unfinished != "" {
		fmt.Fprintf(tw, "\nNOT FOLLOWED\t%s\n", t.Unfinished)
	}
}

func verdictText(v agent.TraceVerdict) string {
	switch v.Kind {
	case agent.VerdictDelivered:
		return fmt.Sprintf("delivered to pod %s (port %s)", v.Pod, v.Port)
	case agent.VerdictTunnel:
		return fmt.Sprintf("sent to the tunnel toward node %s (%s) on port %s", dash(v.Node), v.TunnelTo, v.Port)
	case agent.VerdictHost:
		return fmt.Sprintf("delivered to the node itself (port %s)", v.Port)
	case agent.VerdictOutput:
		return fmt.Sprintf("output to port %s", v.Port)
	case agent.VerdictController:
		return fmt.Sprintf("sent to the agent by plugin %s in table %s", v.Plugin, v.Table)
	case agent.VerdictDropped:
		s := fmt.Sprintf("dropped by plugin %s in table %s", dash(v.Plugin), v.Table)
		if v.Description != "" {
			s += ": " + v.Description
		}
		return s
	}
	return v.Kind
}
