package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/host/yardctl"
	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
)

// templateConfig is the template plugin's config section: it drops TCP
// to port 2323, which nothing in this test uses, so its flows are there to
// be seen without changing the traffic the test watches.
const templateConfig = "{blockTCPPorts: [2323]}"

// TestThirdPartyPluginThenUninstall is an operator's day on one cluster of
// real nodes, Switchyard installed from switchyard.yml. A UDP stream runs
// from a pod on node-1 to a pod on node-2 throughout the plugin steps.
//
//  1. Add the template plugin as the manifest's comments say: its image
//     loaded on every node, its init container (copies the binary into
//     the agent pod's extra-plugins volume) and its plugins: entry
//     uncommented and applied. The agent DaemonSet rolls; on every node
//     the plugin is synced (yardctl on the agent socket, and the node's
//     NodeAgent), its table is wired into the pipeline, and its flows are
//     on br-int under its cookie (ovs-ofctl as the independent witness).
//  2. Remove it: apply switchyard.yml as it was. The DaemonSet rolls; its
//     flows, table and registration are gone on every node, and nothing
//     jumps to its table any more.
//
// Neither step loses a request, restarts the pods or changes their IPs:
// the agent restarts, the switch keeps forwarding.
//
//  3. Uninstall as the README says: apply uninstall.yaml, see its pods
//     wait on every node, delete switchyard.yml, wait for the uninstall
//     pods to be Ready, delete them. Every node is then as the harness
//     made it (links, the node IP on eth0, CNI directories) with no
//     Switchyard state left, and NotReady for want of a CNI config.
func TestThirdPartyPluginThenUninstall(t *testing.T) {
	imgs := realnode.ProductImages(t)
	template := realnode.ProductImages(t, "plugin-template")[0]
	c := realnode.Start(t, realnode.Options{Nodes: 2, Images: imgs})
	// What the harness made, before Switchyard touches the nodes: after
	// the uninstall each node must look the same again.
	before := map[string]nodeState{}
	for _, n := range c.Nodes {
		before[n.Name] = readNodeState(t, n)
	}
	yml := realnode.Manifest(t)
	c.Apply(t, yml)
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 15))
		}
	}
	pair := c.NewUDPPair(t, "default", c.Nodes[0], c.Nodes[1])

	// 1. Add the plugin.
	for _, n := range c.Nodes {
		if out, err := n.Ctr("images", "import", template); err != nil {
			t.Fatalf("%s: importing %s: %v\n%s", n.Name, template, err, out)
		}
	}
	rollAgents(t, c, pair, "adding the template plugin", realnode.WithTemplatePlugin(t, yml, templateConfig), withInit(true))
	loaded := map[string]templateOnNode{}
	for _, n := range c.Nodes {
		loaded[n.Name] = checkTemplateLoaded(t, n)
	}
	waitNodeAgents(t, c, true)
	if err := pair.Unchanged(); err != nil {
		t.Errorf("after adding the plugin: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 2. Remove it again.
	rollAgents(t, c, pair, "removing the template plugin", yml, withInit(false))
	for _, n := range c.Nodes {
		checkTemplateGone(t, n, loaded[n.Name])
	}
	waitNodeAgents(t, c, false)
	if err := pair.Unchanged(); err != nil {
		t.Errorf("after removing the plugin: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 3. Uninstall: the pods first (README: drain the nodes), so their
	// CNI DEL runs while the agents still do.
	for _, p := range []*corev1.Pod{pair.Client, pair.Server} {
		if err := c.CP.Client.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := testenv.Eventually("the test pods gone and their sandboxes torn down", 60*time.Second, 250*time.Millisecond, func() error {
		for _, p := range []*corev1.Pod{pair.Client, pair.Server} {
			if _, err := c.CP.Client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("pod %s still there", p.Name)
			}
		}
		return c.SandboxesSettled()
	})
	if err != nil {
		t.Fatal(err)
	}
	// The uninstall DaemonSet goes first: its pods must be on the nodes
	// before switchyard.yml goes, since a node whose OVS pod is gone has
	// its IP on a bridge that passes nothing until the uninstall pod
	// gives it back to eth0.
	uninstall := realnode.UninstallManifest(t)
	c.Apply(t, uninstall)
	t.Cleanup(func() { c.Delete(t, uninstall, 60*time.Second) })
	err = testenv.Eventually("an uninstall pod waiting on every node (Init:0/1)", 60*time.Second, 250*time.Millisecond, func() error {
		pods, err := c.CP.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=switchyard,component=uninstall"})
		if err != nil {
			return err
		}
		waiting := map[string]bool{}
		for _, p := range pods.Items {
			st := p.Status.InitContainerStatuses
			if len(st) == 1 && st[0].State.Running != nil && strings.Contains(c.ContainerLog(&p, 5), "waiting for Switchyard's pods to be deleted") {
				waiting[p.Spec.NodeName] = true
			}
		}
		if len(waiting) != len(c.Nodes) {
			return fmt.Errorf("waiting on %v", waiting)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 10))
	}
	c.Delete(t, yml, 180*time.Second)
	// The uninstall pod's init container does the work; its main container
	// only waits, so Ready means "this node is clean".
	err = c.WaitDaemonSetRolled("kube-system", "switchyard-uninstall", "app=switchyard,component=uninstall", func(p *corev1.Pod) error {
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.RestartCount > 0 {
				why := ""
				if last := cs.LastTerminationState.Terminated; last != nil {
					why = fmt.Sprintf(": exit %d, %s", last.ExitCode, last.Message)
				}
				return testenv.Permanent(fmt.Errorf("init container %s was restarted %d times; its last failure%s", cs.Name, cs.RestartCount, why))
			}
		}
		return nil
	}, 180*time.Second)
	if err != nil {
		t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 30))
	}
	pods, err := c.CP.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=switchyard,component=uninstall"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(c.Nodes) {
		t.Fatalf("%d uninstall pods, want one per node", len(pods.Items))
	}
	for _, p := range pods.Items {
		log := c.ContainerLog(&p, 30)
		for _, want := range []string{"deleted underlay bridge br-phy", "deleted bridge br-int", "switchyard is uninstalled from this node"} {
			if !strings.Contains(log, want) {
				t.Errorf("the uninstall pod on %s did not say %q:\n%s", p.Spec.NodeName, want, log)
			}
		}
	}
	for _, n := range c.Nodes {
		checkUninstalled(t, n, before[n.Name])
		err := c.WaitNode(n.Name, func(node *corev1.Node) error {
			if err := realnode.Ready(false)(node); err != nil {
				return err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && !strings.Contains(cond.Message, "NetworkReady=false") {
					return fmt.Errorf("NotReady, but not for want of a network: %s: %s", cond.Reason, cond.Message)
				}
			}
			return nil
		}, 90*time.Second)
		if err != nil {
			t.Errorf("after the uninstall: %v\n%s kubelet:\n%s", err, n.Name, n.KubeletLog(20))
		}
	}
	c.Delete(t, uninstall, 60*time.Second)
	if t.Failed() {
		t.Logf("kube-system:\n%s", c.Describe("kube-system", 30))
	}
}

// withInit accepts an agent pod that has (or has not) the template
// plugin's init container.
func withInit(want bool) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		has := slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "plugin-template" })
		if has != want {
			return fmt.Errorf("init container plugin-template: %v, want %v", has, want)
		}
		return nil
	}
}

// rollAgents applies yml (which changes the agent DaemonSet) while the
// pair's UDP stream runs, waits until every agent pod is a new one that
// podOK accepts and Ready, and fails the test if a request was lost.
func rollAgents(t *testing.T, c *realnode.Cluster, pair *realnode.UDPPair, what string, yml []byte, podOK func(*corev1.Pod) error) {
	t.Helper()
	stop := pair.Stream()
	started := time.Now()
	c.Apply(t, yml)
	err := c.WaitDaemonSetRolled("kube-system", "switchyard-agent", "app=switchyard,component=agent", podOK, 240*time.Second)
	rolled := time.Since(started)
	time.Sleep(2 * time.Second) // the new agents' first seconds, under traffic
	res := stop()
	if err != nil {
		t.Fatalf("%s: %v\nkube-system:\n%s", what, err, c.Describe("kube-system", 30))
	}
	t.Logf("%s: the agent DaemonSet rolled in %v; %d requests pod to pod across nodes, %d lost", what, rolled.Round(time.Millisecond), res.Sent, len(res.Lost))
	if res.Sent < 100 {
		t.Errorf("%s: only %d requests sent during the rollout", what, res.Sent)
	}
	if len(res.Lost) > 0 {
		t.Errorf("%s: %d of %d requests lost:\n%s\nkube-system:\n%s", what, len(res.Lost), res.Sent, strings.Join(res.Lost, "\n"), c.Describe("kube-system", 30))
	}
}

// yardctlJSON runs `yardctl ARGS -o json` against the node's agent and
// decodes its answer into out.
func yardctlJSON(t *testing.T, n *realnode.Node, out any, args ...string) {
	t.Helper()
	s, err := n.Yardctl(append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("yardctl %s on %s: %v\n%s", strings.Join(args, " "), n.Name, err, s)
	}
}

// templateOnNode is what the agent of one node assigned to the plugin.
type templateOnNode struct {
	prefix uint16
	table  uint8
}

// cookieFilter is the ovs-ofctl filter for every flow of a cookie prefix.
func (p templateOnNode) cookieFilter() string {
	return fmt.Sprintf("cookie=%#x/%#x", pipeline.Cookie(p.prefix, 0, 0), pipeline.CookiePrefixMask)
}

// checkTemplateLoaded checks on n that the agent runs the template plugin
// synced, gave it its table, and that br-int holds its flows: the drop of
// the configured port and the table's miss flow, all in its table and
// under its cookie prefix, exactly the flows the agent records for it, and
// its table reached from the rest of the pipeline.
func checkTemplateLoaded(t *testing.T, n *realnode.Node) templateOnNode {
	t.Helper()
	var ps []agent.PluginStatus
	yardctlJSON(t, n, &ps, "get", "plugins")
	i := slices.IndexFunc(ps, func(p agent.PluginStatus) bool { return p.Name == "template" })
	if i < 0 {
		t.Fatalf("%s: the agent does not run the template plugin; its plugins: %+v", n.Name, ps)
	}
	p := ps[i]
	if p.State != agent.StateSynced || p.Version != "0.1.0" || p.Restarts != 0 || p.CookiePrefix == 0 || p.LastError != "" {
		t.Errorf("%s: template plugin %+v, want synced, version 0.1.0, no restarts, a cookie prefix, no error", n.Name, p)
	}
	var ts []agent.TableStatus
	yardctlJSON(t, n, &ts, "get", "tables", "--plugin", "template")
	if len(ts) != 1 || ts[0].Table != "template.block" || ts[0].Stage != "EgressSecurity" || ts[0].Miss != "next" {
		t.Fatalf("%s: template's tables %+v, want template.block in stage EgressSecurity, miss next", n.Name, ts)
	}
	on := templateOnNode{prefix: p.CookiePrefix, table: ts[0].ID}

	var recorded []yardctl.Flow
	yardctlJSON(t, n, &recorded, "get", "flows", "--plugin", "template")
	var want []string
	for _, f := range recorded {
		want = append(want, f.Flow)
	}
	got, err := n.BrIntFlows(on.cookieFilter())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: br-int holds under template's cookie prefix %#x:\n  %s\nthe agent records:\n  %s", n.Name, p.CookiePrefix, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	inTable := fmt.Sprintf(" table=%d,", on.table)
	drop := false
	for _, f := range got {
		if !strings.Contains(f, inTable) {
			t.Errorf("%s: template flow outside its table %d: %s", n.Name, on.table, f)
		}
		drop = drop || strings.Contains(f, "tcp,tp_dst=2323 actions=drop")
	}
	if !drop || len(got) != 2 {
		t.Errorf("%s: template's flows on br-int %q, want the drop of tcp port 2323 and the table's miss flow", n.Name, got)
	}
	jumps := jumpsTo(t, n, on.table)
	if len(jumps) == 0 {
		t.Errorf("%s: no flow of br-int goes to template's table %d: it is not in the pipeline", n.Name, on.table)
	}
	t.Logf("%s: template synced, cookie prefix %#x, table %d (reached by %d flows); its flows on br-int:\n  %s",
		n.Name, on.prefix, on.table, len(jumps), strings.Join(got, "\n  "))
	return on
}

// checkTemplateGone checks on n that nothing of the template plugin is
// left: not in the agent's plugins or tables, no flow under its cookie
// prefix or in its table, and no flow going to that table.
func checkTemplateGone(t *testing.T, n *realnode.Node, was templateOnNode) {
	t.Helper()
	var ps []agent.PluginStatus
	yardctlJSON(t, n, &ps, "get", "plugins")
	for _, p := range ps {
		if p.Name == "template" || p.CookiePrefix == was.prefix {
			t.Errorf("%s: after the removal the agent still has %+v", n.Name, p)
		}
		if p.State != agent.StateSynced {
			t.Errorf("%s: plugin %s is %s after the removal, want synced", n.Name, p.Name, p.State)
		}
	}
	var ts []agent.TableStatus
	yardctlJSON(t, n, &ts, "get", "tables")
	for _, tb := range ts {
		if tb.Owner == "template" || strings.HasPrefix(tb.Table, "template.") || tb.ID == was.table {
			t.Errorf("%s: after the removal the agent still has table %+v", n.Name, tb)
		}
	}
	for _, filter := range []string{was.cookieFilter(), fmt.Sprintf("table=%d", was.table)} {
		got, err := n.BrIntFlows(filter)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			t.Errorf("%s: after the removal br-int still holds (%s):\n  %s", n.Name, filter, strings.Join(got, "\n  "))
		}
	}
	if jumps := jumpsTo(t, n, was.table); len(jumps) > 0 {
		t.Errorf("%s: after the removal flows still go to template's table %d:\n  %s", n.Name, was.table, strings.Join(jumps, "\n  "))
	}
}

var gotoRE = regexp.MustCompile(`goto_table:(\d+)|resubmit\(,(\d+)\)`)

// jumpsTo lists br-int's flows that continue in table id.
func jumpsTo(t *testing.T, n *realnode.Node, id uint8) []string {
	t.Helper()
	all, err := n.BrIntFlows("")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		for _, m := range gotoRE.FindAllStringSubmatch(f, -1) {
			s := m[1] + m[2]
			if v, err := strconv.Atoi(s); err == nil && v == int(id) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// waitNodeAgents waits until every node's NodeAgent, read through the
// apiserver with `yardctl get agents`, lists the template plugin synced
// (want) or does not list it (!want), and is Ready.
func waitNodeAgents(t *testing.T, c *realnode.Cluster, want bool) {
	t.Helper()
	err := testenv.Eventually(fmt.Sprintf("NodeAgents listing the template plugin: %v", want), 60*time.Second, time.Second, func() error {
		var out strings.Builder
		cmd := yardctl.NewCommand(&out)
		cmd.SetArgs([]string{"get", "agents", "--kubeconfig", c.CP.Kubeconfig, "-o", "json"})
		if err := cmd.Execute(); err != nil {
			return err
		}
		var nas []crdv1.NodeAgent
		if err := json.Unmarshal([]byte(out.String()), &nas); err != nil {
			return fmt.Errorf("%v: %s", err, out.String())
		}
		if len(nas) != len(c.Nodes) {
			return fmt.Errorf("%d NodeAgents", len(nas))
		}
		for _, na := range nas {
			i := slices.IndexFunc(na.Status.Plugins, func(p crdv1.NodeAgentPlugin) bool { return p.Name == "template" })
			switch {
			case want && i < 0:
				return fmt.Errorf("NodeAgent %s lists no template plugin: %+v", na.Name, na.Status.Plugins)
			case want && (na.Status.Plugins[i].State != agent.StateSynced || !slices.Contains(na.Status.Plugins[i].Tables, "template.block")):
				return fmt.Errorf("NodeAgent %s: template plugin %+v, want synced with table template.block", na.Name, na.Status.Plugins[i])
			case !want && i >= 0:
				return fmt.Errorf("NodeAgent %s still lists %+v", na.Name, na.Status.Plugins[i])
			}
			ready := slices.ContainsFunc(na.Status.Conditions, func(c metav1.Condition) bool {
				return c.Type == "Ready" && c.Status == metav1.ConditionTrue
			})
			if !ready {
				return fmt.Errorf("NodeAgent %s not Ready: %+v", na.Name, na.Status.Conditions)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// nodeState is what the uninstall must give back: the node's links and
// the contents of its CNI directories, as the harness made them.
type nodeState struct {
	Links          []string
	CNIBin, CNIEtc []string
}

func readNodeState(t *testing.T, n *realnode.Node) nodeState {
	t.Helper()
	return nodeState{Links: links(t, n), CNIBin: dirNames(t, n.Private("/opt/cni/bin")), CNIEtc: dirNames(t, n.Private("/etc/cni/net.d"))}
}

// links lists the names of the links in the node's network namespace.
func links(t *testing.T, n *realnode.Node) []string {
	t.Helper()
	out, err := testenv.Run("ip", "-n", n.NetNS, "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		// "2: eth0@if9: <BROADCAST,...": the name, without the peer.
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// checkUninstalled compares the node with the state the harness left it
// in and checks that no Switchyard state is left on it.
func checkUninstalled(t *testing.T, n *realnode.Node, was nodeState) {
	t.Helper()
	now := readNodeState(t, n)
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		// Gateway, tunnel, bridges (br-int, br-phy) and pod veths: all gone.
		{"links", now.Links, was.Links},
		// The conflist, switchyard-cni and the chained plugins it brought.
		{"CNI bin dir /opt/cni/bin", now.CNIBin, was.CNIBin},
		{"CNI conf dir /etc/cni/net.d", now.CNIEtc, was.CNIEtc},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %s after the uninstall: %q, before the install: %q", n.Name, c.what, c.got, c.want)
		}
	}
	// The OVS database (under /var/lib/switchyard/ovs), OVS's run
	// directory and the agent's run and state directories. Each is a
	// mount point on these nodes, so it may stay, but empty.
	for _, d := range []string{"/var/lib/switchyard", "/run/switchyard", "/run/openvswitch"} {
		if left := dirNames(t, n.Private(d)); len(left) > 0 {
			t.Errorf("%s: %s still holds %q after the uninstall", n.Name, d, left)
		}
	}
	// The node IP is back on its uplink (the underlay had moved it onto
	// br-phy), so the node still reaches the apiserver.
	out, err := testenv.Run("ip", "-n", n.NetNS, "-o", "-4", "addr", "show", "dev", "eth0")
	if err == nil && !strings.Contains(out, " "+n.IP.String()+"/") {
		err = fmt.Errorf("eth0 does not hold the node IP %s: %s", n.IP, out)
	}
	if err != nil {
		t.Errorf("%s: %v", n.Name, err)
	}
}
