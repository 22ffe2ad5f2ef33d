package realnode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestOVSCannotStart applies switchyard.yml asking for the kernel datapath
// on nodes without the openvswitch module (this machine has none). The
// OVS pod must say so, in its readiness failure and in its log, with what
// to do, and wait instead of crash-looping; the agent pod waits for it and
// says the same; the node stays NotReady.
func TestOVSCannotStart(t *testing.T) {
	c := realnode.Start(t, realnode.Options{Nodes: 1, Images: realnode.ProductImages(t)})
	const auto = "datapathType: auto"
	yml := string(realnode.Manifest(t))
	if !strings.Contains(yml, auto) {
		t.Fatalf("switchyard.yml's agent config has no %q to change", auto)
	}
	c.Apply(t, []byte(strings.Replace(yml, auto, "datapathType: system", 1)))
	ctx := context.Background()
	const reason = "the Open vSwitch kernel datapath is not available on this node"
	var ovs *corev1.Pod
	err := testenv.Eventually("the OVS pod unready, its readiness naming the missing kernel datapath", 120*time.Second, time.Second, func() error {
		pods, err := c.CP.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app=switchyard,component=ovs"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d OVS pods", len(pods.Items))
		}
		ovs = &pods.Items[0]
		if ovs.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("OVS pod %s", ovs.Status.Phase)
		}
		if ev := c.Events("kube-system", ovs.Name); !strings.Contains(ev, "Readiness probe failed") || !strings.Contains(ev, reason) {
			return fmt.Errorf("events:%s", ev)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Describe("kube-system", 10))
	}
	// The first liveness probe runs 30 s after the container starts: past
	// it (and one more period), liveness must have passed every time.
	started := ovs.Status.ContainerStatuses[0].State.Running
	if started == nil {
		t.Fatalf("OVS container not running: %+v", ovs.Status.ContainerStatuses[0].State)
	}
	time.Sleep(time.Until(started.StartedAt.Add(45 * time.Second)))
	ovs, err = c.CP.Client.CoreV1().Pods("kube-system").Get(ctx, ovs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := ovs.Status.ContainerStatuses[0]
	if cs.Ready || cs.RestartCount != 0 {
		t.Errorf("OVS container ready=%v restarts=%d, want unready and never restarted", cs.Ready, cs.RestartCount)
	}
	ev := c.Events("kube-system", ovs.Name)
	if strings.Contains(ev, "Liveness probe failed") {
		t.Errorf("the liveness probe failed while OVS waits for its datapath:%s", ev)
	}
	t.Logf("OVS pod %s after %v: ready=%v restarts=%d, events:%s", ovs.Name, time.Since(started.StartedAt.Time).Round(time.Second), cs.Ready, cs.RestartCount, ev)
	log := c.ContainerLog(ovs, 20)
	for _, want := range []string{"Open vSwitch cannot start; waiting", reason, "modprobe openvswitch", "bridge.datapathType"} {
		if !strings.Contains(log, want) {
			t.Errorf("the OVS pod's log does not say %q:\n%s", want, log)
		}
	}

	agents, err := c.CP.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app=switchyard,component=agent"})
	if err != nil || len(agents.Items) != 1 {
		t.Fatalf("agent pods: %v %v", agents, err)
	}
	agent := &agents.Items[0]
	if agent.Status.Phase != corev1.PodPending {
		t.Errorf("agent pod %s, want Pending in its wait-for-ovs init container", agent.Status.Phase)
	}
	if log := c.ContainerLog(agent, 5); !strings.Contains(log, "waiting for Open vSwitch") || !strings.Contains(log, reason) {
		t.Errorf("the agent pod's wait-for-ovs log does not give the reason:\n%s", log)
	}
	node, err := c.CP.Client.CoreV1().Nodes().Get(ctx, c.Nodes[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := realnode.Ready(false)(node); err != nil {
		t.Errorf("node %s: %v", node.Name, err)
	}
	if t.Failed() {
		t.Logf("kube-system:\n%s", c.Describe("kube-system", 10))
	}
}
