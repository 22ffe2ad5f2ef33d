package yardctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
)

// traceflowCmd is `yardctl traceflow`: a trace run by the cluster (a
// Traceflow object), from any machine with a kubeconfig, across every node
// the packet crosses.
func traceflowCmd(o *options) *cobra.Command {
	var kubeconfig string
	var keep bool
	var spec crdv1.TraceflowSpec
	cmd := &cobra.Command{
		Use:   "traceflow --from NAMESPACE/POD (--to IP | --to-pod NAMESPACE/POD | --to-service NAMESPACE/NAME) [--protocol tcp --port 80]",
		Short: "Trace a packet through the cluster with a Traceflow object: each node's agent traces its part, the status tells the whole path",
		Example: `  yardctl traceflow --from default/web-1 --to-pod default/db-0 --port 5432
  yardctl traceflow --from default/web-1 --to-service default/api --port 80 -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec.Source == "" || (spec.DestinationIP == "" && spec.DestinationPod == "" && spec.DestinationService == "") {
				return &ExitError{ExitUsage, fmt.Errorf("say where the packet starts and goes: --from NAMESPACE/POD and one of --to, --to-pod, --to-service")}
			}
			c, err := clusterClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			tf, err := runTraceflow(ctx, c, spec, keep)
			if err != nil {
				return err
			}
			if err := o.print(cmd.OutOrStdout(), tf, func(tw *tabwriter.Writer) { traceflowTable(tw, tf) }); err != nil {
				return err
			}
			switch {
			case tf.Status.Phase != crdv1.TraceflowSucceeded:
				return &ExitError{ExitFailure, fmt.Errorf("the trace failed: %s", tf.Status.Reason)}
			case tf.Status.Outcome == agent.VerdictDelivered || tf.Status.Outcome == agent.VerdictHost || tf.Status.Outcome == agent.VerdictTunnel:
				return nil
			}
			return &ExitError{ExitNotDelivered, fmt.Errorf("the packet was not delivered (%s)", tf.Status.Outcome)}
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&spec.Source, "from", "", "source pod (namespace/name), on any node")
	f.StringVar(&spec.DestinationIP, "to", "", "destination IP")
	f.StringVar(&spec.DestinationPod, "to-pod", "", "destination pod (namespace/name), on any node")
	f.StringVar(&spec.DestinationService, "to-service", "", "destination Service (namespace/name): its cluster IP, and the endpoint chosen")
	f.StringVar(&spec.Protocol, "protocol", "tcp", "tcp, udp, sctp or icmp")
	f.Int32Var(&spec.Port, "port", 0, "destination port (tcp, udp, sctp)")
	f.Int32Var(&spec.TimeoutSeconds, "trace-timeout", 20, "seconds the cluster has to finish the trace")
	f.BoolVar(&keep, "keep", false, "keep the Traceflow object (default: delete it once read)")
	return cmd
}

// cluster is the apiserver the cluster-wide commands ask: its address, for
// messages, and a dynamic client for Switchyard's custom resources.
type cluster struct {
	host string
	dyn  dynamic.Interface
}

// clusterClient loads the kubeconfig at path (or the default rules).
func clusterClient(path string) (cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return cluster{}, &ExitError{ExitUsage, fmt.Errorf("no cluster to ask: %v (pass --kubeconfig or set KUBECONFIG)", err)}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return cluster{}, err
	}
	return cluster{host: cfg.Host, dyn: dyn}, nil
}

// runTraceflow creates the object, waits for the agents to finish it and
// returns it; it is deleted afterwards unless keep.
func runTraceflow(ctx context.Context, c cluster, spec crdv1.TraceflowSpec, keep bool) (*crdv1.Traceflow, error) {
	res := c.dyn.Resource(crdv1.TraceflowsResource)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crdv1.Traceflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: crdv1.SchemeGroupVersion.String(), Kind: "Traceflow"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "yardctl-"}, Spec: spec})
	if err != nil {
		return nil, err
	}
	created, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return nil, &ExitError{ExitUnreachable, fmt.Errorf("creating a Traceflow at %s: %v (is the Traceflow CRD installed, and may you create traceflows?)", c.host, err)}
	}
	name := created.GetName()
	if !keep {
		defer res.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			var tf crdv1.Traceflow
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tf); err != nil {
				return nil, fmt.Errorf("Traceflow %s: %v", name, err)
			}
			if p := tf.Status.Phase; p == crdv1.TraceflowSucceeded || p == crdv1.TraceflowFailed {
				return &tf, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, &ExitError{ExitUnreachable, fmt.Errorf("Traceflow %s did not finish in time: is switchyard-agent running on the source pod's node? (kubectl get traceflow %s -o yaml)", name, name)}
		case <-tick.C:
		}
	}
}

func traceflowTable(tw *tabwriter.Writer, tf *crdv1.Traceflow) {
	for i, n := range tf.Status.Nodes {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "NODE %s\t(%.1f ms)\n", n.Node, float64(n.Micros)/1000)
		fmt.Fprintln(tw, "#\tTABLE\tOWNER\tFLOW BY\tPRIO\tDECISION")
		for j, h := range n.Hops {
			decision := strings.Trim(strings.Join(append([]string{h.Description}, append(h.Notes, h.End)...), "; "), "; ")
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", j+1, h.Table, dash(h.TableOwner), dash(h.Plugin), h.Priority, dash(decision))
		}
		for _, v := range n.Verdicts {
			fmt.Fprintf(tw, "VERDICT\t%s\n", verdictText(agent.TraceVerdict{Kind: v.Kind, Pod: v.Pod, Node: v.Node, Plugin: v.Plugin, Table: v.Table, Description: v.Description}))
		}
		state := "not confirmed"
		if n.DatapathConfirmed {
			state = "confirmed"
		}
		fmt.Fprintf(tw, "DATAPATH\t%s\n", state)
	}
	fmt.Fprintf(tw, "\nRESULT\t%s %s\n", tf.Status.Phase, tf.Status.Outcome)
	if tf.Status.Reason != "" {
		fmt.Fprintf(tw, "REASON\t%s\n", tf.Status.Reason)
	}
}
