package yardctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// agentsCmd is `yardctl agents`: every node's NodeAgent, cluster-wide,
// through the apiserver.
func agentsCmd(o *options) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Every node's agent as it reports itself (NodeAgent objects, through the apiserver): readiness, plugins, restarts, heartbeat",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listAgents(cmd.Context(), o, cmd.OutOrStdout(), kubeconfig)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster)")
	return cmd
}

// listAgents prints every NodeAgent (`yardctl agents`, `yardctl get agents`).
func listAgents(ctx context.Context, o *options, w io.Writer, kubeconfig string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c, err := clusterClient(kubeconfig)
	if err != nil {
		return err
	}
	l, err := c.dyn.Resource(crdv1.NodeAgentsResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return &ExitError{ExitUnreachable, fmt.Errorf("listing NodeAgents at %s: %v (is the NodeAgent CRD installed, and may you list nodeagents?)", c.host, err)}
	}
	agents := make([]crdv1.NodeAgent, 0, len(l.Items))
	for _, u := range l.Items {
		var na crdv1.NodeAgent
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &na); err != nil {
			return fmt.Errorf("NodeAgent %s: %v", u.GetName(), err)
		}
		agents = append(agents, na)
	}
	slices.SortFunc(agents, func(a, b crdv1.NodeAgent) int { return strings.Compare(a.Name, b.Name) })
	now := time.Now()
	return o.print(w, agents, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NODE\tREADY\tPLUGINS\tRESTARTS\tFLOWS\tHEARTBEAT\tREASON")
		for _, na := range agents {
			ready, reason := "Unknown", "-"
			for _, c := range na.Status.Conditions {
				if c.Type == "Ready" {
					ready = string(c.Status)
					if c.Status != metav1.ConditionTrue {
						reason = c.Reason
					}
				}
			}
			var restarts, flows int32
			var ps []string
			for _, p := range na.Status.Plugins {
				restarts += p.Restarts
				flows += p.Flows
				ps = append(ps, p.Name+"="+p.State)
			}
			age := "-"
			if !na.Status.Heartbeat.IsZero() {
				age = now.Sub(na.Status.Heartbeat.Time).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", na.Name, ready, dash(strings.Join(ps, ",")), restarts, flows, age, reason)
		}
	})
}
