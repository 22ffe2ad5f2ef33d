package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// runTraceflow creates a Traceflow, waits until it is no longer Running
// and returns it with how long the cluster took to answer.
func (e *env) runTraceflow(t testing.TB, name string, spec crdv1.TraceflowSpec) (*crdv1.Traceflow, time.Duration) {
	t.Helper()
	// No client-side rate limit: the 5 ms poll below would otherwise be
	// throttled to client-go's default 5 requests/s and time the limiter.
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(crdv1.TraceflowsResource)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crdv1.Traceflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: crdv1.SchemeGroupVersion.String(), Kind: "Traceflow"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Traceflow %s: %v", name, err)
	}
	t.Cleanup(func() { res.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	var tf crdv1.Traceflow
	err = testenv.Eventually("Traceflow "+name+" to finish", 60*time.Second, 5*time.Millisecond, func() error {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		tf = crdv1.Traceflow{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tf); err != nil {
			return err
		}
		if tf.Status.Phase == "" || tf.Status.Phase == crdv1.TraceflowRunning {
			return fmt.Errorf("phase %q after %d node(s)", tf.Status.Phase, len(tf.Status.Nodes))
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	return &tf, took
}

// TestTraceflowObject: the cluster-side Traceflow. Each node's agent does
// its part from the object alone: the source pod's node starts, the node
// the packet tunnels to continues, and the status tells the whole path.
func TestTraceflowObject(t *testing.T) {
	testenv.RequireRoot(t)
	e := start(t)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	e.c.AddPod(t, clusterPod("tf-a", n1))
	b := e.c.AddPod(t, clusterPod("tf-b", n1))
	c := e.c.AddPod(t, clusterPod("tf-c", n2))

	t.Run("across nodes: delivered, both nodes confirmed", func(t *testing.T) {
		tf, took := e.runTraceflow(t, "cross", crdv1.TraceflowSpec{Source: "ops/tf-a", DestinationPod: "ops/tf-c", Protocol: "tcp", Port: 80})
		t.Logf("cross-node Traceflow answered in %v (%d nodes)", took, len(tf.Status.Nodes))
		st := tf.Status
		if st.Phase != crdv1.TraceflowSucceeded || st.Outcome != agent.VerdictDelivered || len(st.Nodes) != 2 {
			t.Fatalf("status %+v, want Succeeded, delivered, over 2 nodes", st)
		}
		if st.Nodes[0].Node != n1.Name || st.Nodes[1].Node != n2.Name {
			t.Errorf("nodes %s, %s; want %s then %s", st.Nodes[0].Node, st.Nodes[1].Node, n1.Name, n2.Name)
		}
		if v := st.Nodes[0].Verdicts[0]; v.Kind != agent.VerdictTunnel || v.Node != n2.Name {
			t.Errorf("first node's verdict %+v, want the tunnel toward %s", v, n2.Name)
		}
		if v := st.Nodes[1].Verdicts[0]; v.Kind != agent.VerdictDelivered || v.Pod != "ops/tf-c" {
			t.Errorf("second node's verdict %+v, want delivered to ops/tf-c (%s)", v, c.IP())
		}
		for _, n := range st.Nodes {
			if !n.DatapathConfirmed {
				t.Errorf("node %s: the marked packet did not confirm the trace", n.Node)
			}
			tunnel := false
			for _, h := range n.Hops {
				tunnel = tunnel || h.Plugin == "tunnel"
			}
			if !tunnel {
				t.Errorf("node %s: no hop of the tunnel plugin in %+v", n.Node, n.Hops)
			}
		}
	})
	t.Run("yardctl traceflow through the apiserver", func(t *testing.T) {
		args := []string{"traceflow", "--kubeconfig", e.cp.Kubeconfig, "--from", "ops/tf-a", "--to-pod", "ops/tf-c", "--port", "80"}
		out, errOut, code := e.yardctl(t, n1, args...)
		t.Logf("yardctl %s\n%s", strings.Join(args, " "), out)
		if code != 0 || !strings.Contains(out, "RESULT\tSucceeded delivered") && !strings.Contains(out, "Succeeded delivered") {
			t.Fatalf("exit %d, want 0 and a delivered result; stderr: %s", code, errOut)
		}
		out, _, code = e.yardctl(t, n1, append(args, "-o", "json")...)
		var tf crdv1.Traceflow
		if err := json.Unmarshal([]byte(out), &tf); err != nil || code != 0 || len(tf.Status.Nodes) != 2 {
			t.Fatalf("-o json: exit %d, %v, %d nodes\n%s", code, err, len(tf.Status.Nodes), out)
		}
		_, errOut, code = e.yardctl(t, n1, "traceflow", "--kubeconfig", e.cp.Kubeconfig, "--from", "ops/tf-a")
		if code == 0 || !strings.Contains(errOut, "--to-pod") {
			t.Errorf("no destination: exit %d, stderr %q; want a usage error naming the flags", code, errOut)
		}
	})
	t.Run("one node: dropped by warden, its table named", func(t *testing.T) {
		tf, took := e.runTraceflow(t, "denied", crdv1.TraceflowSpec{Source: "ops/tf-a", DestinationIP: b.IP().String(), Protocol: "tcp", Port: denyPort})
		t.Logf("one-node Traceflow answered in %v", took)
		st := tf.Status
		if st.Phase != crdv1.TraceflowSucceeded || st.Outcome != agent.VerdictDropped || len(st.Nodes) != 1 {
			t.Fatalf("status %+v, want Succeeded, dropped, on 1 node", st)
		}
		if v := st.Nodes[0].Verdicts[0]; v.Plugin != "warden" || !strings.HasPrefix(v.Table, "warden.") {
			t.Errorf("verdict %+v, want dropped by warden in its table", v)
		}
	})
	t.Run("a node that does not answer fails the trace at its timeout", func(t *testing.T) {
		// Last: node-2's agent stays down. Its flows stay on the switch,
		// so node-1 still traces the packet into the tunnel toward it.
		e.agents[n2.Name].Process.Stop(5 * time.Second)
		start := time.Now()
		tf, took := e.runTraceflow(t, "silent", crdv1.TraceflowSpec{Source: "ops/tf-a", DestinationPod: "ops/tf-c", Protocol: "tcp", Port: 80, TimeoutSeconds: 3})
		st := tf.Status
		if st.Phase != crdv1.TraceflowFailed || !strings.Contains(st.Reason, "node "+n2.Name+" did not continue the trace within 3s") || len(st.Nodes) != 1 {
			t.Fatalf("status %+v, want Failed after node-1's part, naming %s and the timeout", st, n2.Name)
		}
		if took < 3*time.Second || time.Since(start) > 20*time.Second {
			t.Errorf("failed after %v, want soon after the 3 s timeout", took)
		}
		t.Logf("failed after %v: %s", took, st.Reason)
	})
	t.Run("a source that does not exist fails with the reason", func(t *testing.T) {
		tf, _ := e.runTraceflow(t, "nosource", crdv1.TraceflowSpec{Source: "ops/ghost", DestinationIP: b.IP().String(), Protocol: "tcp", Port: 80})
		if tf.Status.Phase != crdv1.TraceflowFailed || !strings.Contains(tf.Status.Reason, "ops/ghost does not exist") {
			t.Errorf("status %+v, want Failed naming the missing source pod", tf.Status)
		}
	})
}

func clusterPod(name string, n *cluster.Node) cluster.PodSpec {
	return cluster.PodSpec{Name: name, Namespace: "ops", Node: n}
}
