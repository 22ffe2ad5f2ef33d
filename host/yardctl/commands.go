package yardctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"switchyard.dev/switchyard/host/agent"
)

// DefaultSocket is the agent's API socket in the DaemonSet.
const DefaultSocket = "/var/run/switchyard/agent.sock"

type options struct {
	socket  string
	output  string
	timeout time.Duration
}

// NewCommand is yardctl's root command; out receives the output.
func NewCommand(out io.Writer) *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:           "yardctl",
		Short:         "Inspect a Switchyard node: plugins, tables, flows, resources, and which plugin decided a packet's fate",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	pf := root.PersistentFlags()
	pf.StringVar(&o.socket, "socket", DefaultSocket, "the agent's API socket")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	pf.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for an agent")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch o.output {
		case "table", "json", "yaml":
			return nil
		}
		return &ExitError{ExitUsage, fmt.Errorf("-o %q: use table, json or yaml", o.output)}
	}
	root.AddCommand(statusCmd(o), getCmd(o), traceCmd(o), traceflowCmd(o), pipelineCmd(o), supportBundleCmd(o), agentsCmd(o))
	return root
}

// print writes v as JSON or YAML, or calls table for the default output.
func (o *options) print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func (o *options) client() *client { return newClient(o.socket, o.timeout) }

// Status is what `yardctl status` shows.
type Status struct {
	Ready    bool                 `json:"ready"`
	NotReady []string             `json:"notReady,omitempty"`
	Plugins  []agent.PluginStatus `json:"plugins"`
}

func statusCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Is the agent ready, and how are its plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			c := o.client()
			body, code, err := c.do(ctx, "GET", "/readyz", nil)
			if err != nil {
				return err
			}
			var s Status
			s.Ready = code == 200
			if !s.Ready {
				for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
					s.NotReady = append(s.NotReady, strings.TrimPrefix(l, "not ready: "))
				}
			}
			if err := c.get(ctx, "/v1/plugins", &s.Plugins); err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), s, func(tw *tabwriter.Writer) {
				ready := "yes"
				if !s.Ready {
					ready = "no"
				}
				fmt.Fprintf(tw, "READY\t%s\n", ready)
				for _, m := range s.NotReady {
					fmt.Fprintf(tw, "  not ready:\t%s\n", m)
				}
				fmt.Fprintln(tw)
				pluginTable(tw, s.Plugins)
			})
		},
	}
}

func pluginTable(tw *tabwriter.Writer, ps []agent.PluginStatus) {
	fmt.Fprintln(tw, "PLUGIN\tSTATE\tVERSION\tRESTARTS\tFLOWS\tSYNC\tLAST ERROR")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", p.Name, p.State, dash(p.Version), p.Restarts, p.Flows, syncText(p), dash(p.LastError))
	}
}

func syncText(p agent.PluginStatus) string {
	if p.SyncMillis == 0 {
		return "-"
	}
	return (time.Duration(p.SyncMillis * float64(time.Millisecond))).Round(time.Millisecond).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func getCmd(o *options) *cobra.Command {
	var plugin, table, policy, kubeconfig string
	get := &cobra.Command{
		Use:       "get plugins|tables|flows|resources|policies|agents",
		Short:     "Show the agent's plugins, table layout, flows (with their owner), shared resources, or the policies netpol realized here",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"plugins", "tables", "flows", "resources", "policies", "agents"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			c, w := o.client(), cmd.OutOrStdout()
			switch args[0] {
			case "plugins", "plugin":
				var ps []agent.PluginStatus
				if err := c.get(ctx, "/v1/plugins", &ps); err != nil {
					return err
				}
				if plugin != "" {
					ps = slices.DeleteFunc(ps, func(p agent.PluginStatus) bool { return p.Name != plugin })
				}
				return o.print(w, ps, func(tw *tabwriter.Writer) { pluginTable(tw, ps) })
			case "tables", "table":
				var ts []agent.TableStatus
				if err := c.get(ctx, "/v1/tables", &ts); err != nil {
					return err
				}
				ts = slices.DeleteFunc(ts, func(t agent.TableStatus) bool {
					return (plugin != "" && t.Owner != plugin) || (table != "" && t.Table != table)
				})
				return o.print(w, ts, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "ID\tTABLE\tPIPELINE\tSTAGE\tOWNER\tEXPORTED\tMISS\tFLOWS")
					for _, t := range ts {
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%v\t%s\t%d\n", t.ID, t.Table, t.Pipeline, t.Stage, t.Owner, t.Exported, t.Miss, t.Flows)
					}
				})
			case "flows", "flow":
				return getFlows(ctx, o, c, w, plugin, table)
			case "agents", "agent":
				return listAgents(cmd.Context(), o, w, kubeconfig)
			case "policies", "policy":
				p, err := getPolicies(ctx, c, policy)
				if err != nil {
					return err
				}
				return o.print(w, p, func(tw *tabwriter.Writer) { policiesTable(tw, p) })
			case "resources", "resource":
				var rs []agent.ResourceStatus
				if err := c.get(ctx, "/v1/resources", &rs); err != nil {
					return err
				}
				if plugin != "" {
					rs = slices.DeleteFunc(rs, func(r agent.ResourceStatus) bool { return r.Owner != plugin })
				}
				return o.print(w, rs, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NAME\tKIND\tOWNER\tVALUE\tOFFSET\tWIDTH\tPUBLISHED")
					for _, r := range rs {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%v\n", r.Name, r.Kind, r.Owner, r.Value, r.Offset, r.Width, r.Published)
					}
				})
			}
			return &ExitError{ExitUsage, fmt.Errorf("get %q: say plugins, tables, flows, resources, policies or agents", args[0])}
		},
	}
	get.Flags().StringVar(&plugin, "plugin", "", "only this plugin's")
	get.Flags().StringVar(&table, "table", "", "only this table's (by name)")
	get.Flags().StringVar(&kubeconfig, "kubeconfig", "", "get agents: kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, or in-cluster)")
	get.Flags().StringVar(&policy, "policy", "", "get policies: only this policy's rules (as netpol names it, e.g. ns/name)")
	return get
}

// Flow is one row of `get flows`.
type Flow struct {
	Plugin string `json:"plugin"`
	Flow   string `json:"flow"`
}

func getFlows(ctx context.Context, o *options, c *client, w io.Writer, plugin, table string) error {
	var names []string
	if plugin != "" {
		names = []string{plugin}
	} else {
		var ps []agent.PluginStatus
		if err := c.get(ctx, "/v1/plugins", &ps); err != nil {
			return err
		}
		for _, p := range ps {
			names = append(names, p.Name)
		}
	}
	// Flows are in the switch's text, with table IDs (none for table 0,
	// as ovs-ofctl prints them): --table resolves the name first.
	keep := func(string) bool { return true }
	if table != "" {
		var ts []agent.TableStatus
		if err := c.get(ctx, "/v1/tables", &ts); err != nil {
			return err
		}
		i := slices.IndexFunc(ts, func(t agent.TableStatus) bool { return t.Table == table })
		if i < 0 {
			return &ExitError{ExitUsage, fmt.Errorf("no table %q on this node (yardctl get tables lists them)", table)}
		}
		id := ts[i].ID
		keep = func(f string) bool {
			if id == 0 {
				return !strings.Contains(f, " table=")
			}
			return strings.Contains(f, fmt.Sprintf(" table=%d,", id))
		}
	}
	var rows []Flow
	for _, n := range names {
		var fs []string
		if err := c.get(ctx, "/v1/flows?plugin="+n, &fs); err != nil {
			return err
		}
		for _, f := range fs {
			if keep(f) {
				rows = append(rows, Flow{Plugin: n, Flow: f})
			}
		}
	}
	if rows == nil {
		rows = []Flow{}
	}
	return o.print(w, rows, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "PLUGIN\tFLOW")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r.Plugin, r.Flow)
		}
	})
}
