package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	ctrlegress "switchyard.dev/switchyard/controller/egress"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

// env is a running cluster with podnet, tunnel and egress on every node,
// the controller's Egress allocation, and an external host.
type env struct {
	cp     *controlplane.ControlPlane
	c      *cluster.Cluster
	dyn    dynamic.Interface
	agents map[string]*nodeagent.Agent
	extNS  string
	extIP  net.IP
	// extIPv6 is the external host's IPv6 address (startDualStack only).
	extIPv6 net.IP
	// cut are the nodes whose underlay link the test cut.
	cut map[string]bool
}

const (
	whoamiPort = 9000
	namespace  = "egr"
	// externalHost is the external host's number on the underlay.
	externalHost = 250
)

func start(t testing.TB, nodes int) *env {
	t.Helper()
	return startCluster(t, cluster.Options{Nodes: nodes})
}

// startDualStack is start with dual-stack pods and an IPv6 underlay beside
// the IPv4 one (nodes and the external host have both; the tunnel stays on
// IPv4).
func startDualStack(t testing.TB, nodes int) *env {
	t.Helper()
	e := startCluster(t, cluster.Options{Nodes: nodes, DualStack: true, UnderlayIPv6: true})
	e.extIPv6 = cluster.UnderlayIPv6(externalHost)
	return e
}

func startCluster(t testing.TB, opts cluster.Options) *env {
	t.Helper()
	if binsErr != nil {
		t.Fatalf("a binary the test runs did not build: %v", binsErr)
	}
	e := &env{agents: map[string]*nodeagent.Agent{}, cut: map[string]bool{}}
	e.cp = controlplane.Start(t)
	var err error
	if e.dyn, err = dynamic.NewForConfig(e.cp.Config); err != nil {
		t.Fatal(err)
	}
	installCRDs(t, e.dyn)
	startAllocator(t, e)
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"],
		Plugins: map[string]string{"podnet": bins["podnet"], "tunnel": bins["tunnel"], "egress": bins["egress"]}}
	opts.Client = e.cp.Client
	opts.StartAgent = func(t testenv.T, n *cluster.Node) {
		e.agents[n.Name] = nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: e.cp,
			Enabled: []string{"podnet", "tunnel", "egress"}, LogLevel: "debug",
			Config: map[string]map[string]any{"egress": {"serviceCIDRs": []string{"10.96.0.0/12"}}}})
	}
	e.c = cluster.Start(t, opts)
	for _, n := range e.c.Nodes {
		e.waitSynced(t, n, "egress")
	}
	e.extNS, e.extIP = e.c.AddExternal(t, externalHost)
	whoami(t, e.extNS, whoamiPort)
	if _, err := e.cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, a := range e.agents {
				t.Logf("agent log of %s (%s):\n%s", name, a.Process.LogPath, a.Process.Tail(60))
			}
		}
	})
	return e
}

// installCRDs creates every CRD of manifests/crds and waits until the
// Egress kinds are served.
func installCRDs(t testing.TB, dyn dynamic.Interface) {
	t.Helper()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	files, _ := fs.Glob(manifests.Files, "crds/*.yaml")
	for _, f := range files {
		b, _ := fs.ReadFile(manifests.Files, f)
		var obj map[string]any
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096).Decode(&obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := dyn.Resource(crdGVR).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing %s: %v", f, err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{crdv1.EgressesResource, crdv1.ExternalIPPoolsResource} {
		if err := testenv.Eventually(gvr.Resource+" served", 30*time.Second, 100*time.Millisecond, func() error {
			_, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// startAllocator runs the controller's Egress allocation in this process
// against the real apiserver.
func startAllocator(t testing.TB, e *env) {
	t.Helper()
	logPath := filepath.Join(testenv.Dir(t, "ctrl"), "egress-controller.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ctrlegress.New(e.dyn, slog.New(slog.NewTextHandler(f, nil))).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("egress controller log:\n%s", b)
		}
	})
}

func (e *env) waitSynced(t testenv.T, n *cluster.Node, plugin string) {
	t.Helper()
	err := testenv.Eventually(plugin+" synced on "+n.Name, 60*time.Second, 100*time.Millisecond, func() error {
		code, body, err := e.agents[n.Name].Get("/v1/plugins")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /v1/plugins: %d %v", code, err)
		}
		var ps []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(body), &ps); err != nil {
			return fmt.Errorf("/v1/plugins: %v", err)
		}
		for _, p := range ps {
			if p.Name == plugin && p.State == "synced" {
				return nil
			} else if p.Name == plugin {
				return fmt.Errorf("%s is %s", plugin, p.State)
			}
		}
		return fmt.Errorf("%s not listed", plugin)
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, e.agents[n.Name].Process.Tail(60))
	}
}

func toUnstructured(t testing.TB, obj runtime.Object, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(crdv1.SchemeGroupVersion.String())
	u.SetKind(kind)
	return u
}

func (e *env) createPool(t testing.TB, p *crdv1.ExternalIPPool) {
	t.Helper()
	if _, err := e.dyn.Resource(crdv1.ExternalIPPoolsResource).Create(context.Background(), toUnstructured(t, p, "ExternalIPPool"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ExternalIPPool %s: %v", p.Name, err)
	}
}

func (e *env) createEgress(t testing.TB, eg *crdv1.Egress) {
	t.Helper()
	if _, err := e.dyn.Resource(crdv1.EgressesResource).Create(context.Background(), toUnstructured(t, eg, "Egress"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Egress %s: %v", eg.Name, err)
	}
}

func (e *env) getEgress(t testenv.T, name string) *crdv1.Egress {
	t.Helper()
	u, err := e.dyn.Resource(crdv1.EgressesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Egress %s: %v", name, err)
	}
	out := &crdv1.Egress{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

func (e *env) updateEgress(t testing.TB, name string, change func(*crdv1.Egress)) {
	t.Helper()
	// The controller and the agents write status meanwhile: retry on a
	// conflict, as kubectl edit would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		eg := e.getEgress(t, name)
		change(eg)
		_, err := e.dyn.Resource(crdv1.EgressesResource).Update(context.Background(), toUnstructured(t, eg, "Egress"), metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating Egress %s: %v", name, err)
	}
}

func (e *env) deleteEgress(t testing.TB, name string) {
	t.Helper()
	if err := e.dyn.Resource(crdv1.EgressesResource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting Egress %s: %v", name, err)
	}
}

// waitCondition waits until the Egress has condition typ with status and
// reason, and returns it.
func (e *env) waitCondition(t testing.TB, name, typ string, status metav1.ConditionStatus, reason string) *crdv1.Egress {
	t.Helper()
	var eg *crdv1.Egress
	err := testenv.Eventually(fmt.Sprintf("Egress %s condition %s=%s (%s)", name, typ, status, reason), 30*time.Second, 100*time.Millisecond, func() error {
		eg = e.getEgress(t, name)
		c := meta.FindStatusCondition(eg.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("status %+v", eg.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return eg
}

// whoami serves, on port in ns, each TCP client its own source address as
// the server sees it, then closes.
func whoami(t testenv.T, ns string, port int) {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatalf("%v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintln(c, host)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
}

// seenAs dials the external server from ns and returns the source address
// it saw.
func (e *env) seenAs(ns string, timeout time.Duration) (string, error) {
	return seenAt(ns, e.extIP, timeout)
}

// seenAt dials the external server at dst (its IPv4 or IPv6 address) from
// ns and returns the source address it saw.
func seenAt(ns string, dst net.IP, timeout time.Duration) (string, error) {
	c, err := netns.Dial(ns, "tcp", net.JoinHostPort(dst.String(), fmt.Sprint(whoamiPort)), timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

// expectSeen waits until every pod is seen with want[pod] (a few seconds:
// the plugins follow the apiserver).
func (e *env) expectSeen(t testing.TB, what string, want map[*cluster.Pod]string) {
	t.Helper()
	expectSeenAt(t, what, e.extIP, want)
}

// expectSeenAt is expectSeen for the external server's address dst.
func expectSeenAt(t testing.TB, what string, dst net.IP, want map[*cluster.Pod]string) {
	t.Helper()
	for p, w := range want {
		var last string
		var lastErr error
		t0, tries := time.Now(), 0
		err := testenv.Eventually(fmt.Sprintf("%s: %s seen at %s as %s", what, p.Key(), dst, w), 20*time.Second, 100*time.Millisecond, func() error {
			tries++
			last, lastErr = seenAt(p.NetNS, dst, 2*time.Second)
			if lastErr != nil || last != w {
				return fmt.Errorf("seen as %q (%v)", last, lastErr)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%v", err)
		} else if took := time.Since(t0); took > 5*time.Second {
			// Slow but in time: say so, a step towards a flake.
			t.Logf("%s: %s seen at %s as %s only after %v (%d tries)", what, p.Key(), dst, w, took.Round(time.Millisecond), tries)
		}
	}
}

// iperf runs a one-shot iperf3 server in srvNS and a 3 s client in
// cliNS, returning the sender's Gbit/s; extra are more client args.
func iperf(b testing.TB, srvNS, srvIP, cliNS string, extra ...string) float64 {
	b.Helper()
	// A one-shot server, not a daemon: it dies with the test process.
	srv := exec.Command("ip", "netns", "exec", srvNS, "iperf3", "-s", "-1", "-B", srvIP)
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		b.Fatalf("iperf3 server: %v", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	time.Sleep(200 * time.Millisecond)
	out, err := netns.Exec(cliNS, append([]string{"iperf3", "-c", srvIP, "-t", "3", "-J"}, extra...)...)
	if err != nil {
		b.Fatalf("iperf3 client: %v %s", err, out)
	}
	var r struct {
		End struct {
			SumSent struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.Fatalf("iperf3 JSON: %v", err)
	}
	return r.End.SumSent.BitsPerSecond / 1e9
}

// snatTargets reads, through netlink in node ns, the addresses the
// egress plugin's nftables tables (ip and ip6) SNAT to; ok is false when
// neither table is there. (The nft command is not part of the test dependencies.)
func snatTargets(t testing.TB, ns string) (targets []string, ok bool) {
	t.Helper()
	f, err := os.Open(netns.Path(ns))
	if err != nil {
		t.Fatalf("opening netns %s: %v", ns, err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatalf("nftables in %s: %v", ns, err)
	}
	var tables []*nftables.Table
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		ts, err := c.ListTablesOfFamily(fam)
		if err != nil {
			t.Fatalf("listing nftables tables in %s: %v", ns, err)
		}
		tables = append(tables, ts...)
	}
	for _, tb := range tables {
		if tb.Name != "switchyard-egress" {
			continue
		}
		rules, err := c.GetRules(tb, &nftables.Chain{Name: "postrouting", Table: tb})
		if err != nil {
			t.Fatalf("rules of %s in %s: %v", tb.Name, ns, err)
		}
		for _, r := range rules {
			var imm net.IP
			for _, x := range r.Exprs {
				switch x := x.(type) {
				case *expr.Immediate:
					imm = net.IP(x.Data)
				case *expr.NAT:
					if x.Type == expr.NATTypeSourceNAT && imm != nil {
						targets = append(targets, imm.String())
					}
				}
			}
		}
		ok = true
	}
	return targets, ok
}
