package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// footprint is everything on a node that a pod can leave behind.
type footprint struct {
	ports []string // OVS ports on br-int other than the gateway
	links []string // host-side pod veths in the node namespace
	ipam  []string // IPAM reservation files
	// records counts the host's interface store entries.
	records int
}

var ofportCookie = regexp.MustCompile(`cookie=0x[0-9a-f]+`)

// footprintOf takes the node's state with independent witnesses: ovs-vsctl,
// ovs-ofctl, iproute2 and the IPAM directory.
func footprintOf(t *testing.T, n *cluster.Node) footprint {
	t.Helper()
	var f footprint
	for _, p := range strings.Fields(n.OVS.Vsctl(t, "list-ports", "br-int")) {
		if p != "sy-gw0" {
			f.ports = append(f.ports, p)
		}
	}
	out, err := n.Exec("ip", "-o", "link", "show", "type", "veth")
	if err != nil {
		t.Fatalf("listing veths on %s: %v", n.Name, err)
	}
	for _, line := range strings.Split(out, "\n") {
		if fs := strings.Fields(line); len(fs) > 1 && strings.HasPrefix(fs[1], "sy") {
			f.links = append(f.links, strings.TrimSuffix(strings.SplitN(fs[1], "@", 2)[0], ":"))
		}
	}
	if data, err := os.ReadFile(filepath.Join(n.Dir, "agent", "run", "interfaces.json")); err == nil {
		var st struct {
			Interfaces []json.RawMessage `json:"interfaces"`
		}
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatalf("interface store on %s: %v", n.Name, err)
		}
		f.records = len(st.Interfaces)
	}
	entries, _ := os.ReadDir(ipamDir(n))
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			f.ipam = append(f.ipam, e.Name())
		}
	}
	return f
}

func ipamDir(n *cluster.Node) string { return filepath.Join(n.Dir, "podnet", "ipam", "switchyard") }

// flowsMentioning returns the dump-flows lines that mention the pod by its
// ofport (match or output) or its IP.
func flowsMentioning(t *testing.T, n *cluster.Node, ofport string, ip string) []string {
	t.Helper()
	var hits []string
	for _, line := range strings.Split(n.OVS.Ofctl(t, "dump-flows", "br-int"), "\n") {
		// podnet tags each pod flow with the pod's ofport (low 32 cookie bits).
		if m := ofportCookie.FindString(line); m != "" {
			var c uint64
			fmt.Sscanf(strings.TrimPrefix(m, "cookie=0x"), "%x", &c)
			if fmt.Sprint(c&0xffffffff) == ofport {
				hits = append(hits, line)
				continue
			}
		}
		if strings.Contains(line, "in_port="+ofport+",") || strings.Contains(line, "in_port="+ofport+" ") ||
			strings.Contains(line, "output:"+ofport) || strings.Contains(line, "load:0x"+hexPort(ofport)+"->") ||
			strings.Contains(line, "set_field:0x"+hexPort(ofport)+"->") ||
			regexp.MustCompile(`[=,]`+regexp.QuoteMeta(ip)+`([, ]|$)`).MatchString(line) {
			hits = append(hits, line)
		}
	}
	return hits
}

func hexPort(ofport string) string {
	var v int
	fmt.Sscanf(ofport, "%d", &v)
	return fmt.Sprintf("%x", v)
}

func ofportOf(t *testing.T, n *cluster.Node, port string) string {
	t.Helper()
	return strings.TrimSpace(n.OVS.Vsctl(t, "get", "Interface", port, "ofport"))
}

// reach fails t unless a ping and a TCP echo from ns to ip work.
func reach(t *testing.T, ns string, ip net.IP) {
	t.Helper()
	if err := probe.Check(ns, probe.ICMP, ip, 0, 3*time.Second); err != nil {
		t.Errorf("ping %s from %s: %v", ip, ns, err)
	}
}

func reachTCP(t *testing.T, ns string, ip net.IP, port int) {
	t.Helper()
	if err := probe.Check(ns, probe.TCP, ip, port, 3*time.Second); err != nil {
		t.Errorf("TCP %s:%d from %s: %v", ip, port, ns, err)
	}
}

func unreachable(t *testing.T, ns string, ip net.IP) {
	t.Helper()
	if err := probe.Check(ns, probe.ICMP, ip, 0, 2*time.Second); err == nil {
		t.Errorf("ping %s from %s succeeded, want it blocked", ip, ns)
	}
}

// cniError is the JSON error a CNI plugin prints.
type cniError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// runBinary runs the thin binary the way a runtime does (environment and
// stdin) and returns its parsed error, or nil on success.
func runBinary(t *testing.T, env map[string]string, stdin string) (*cniError, string) {
	t.Helper()
	cmd := exec.Command(bins.cni)
	cmd.Env = []string{"CNI_PATH=" + bins.dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return nil, stdout.String()
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("switchyard-cni did not exit within 60s")
	}
	var e cniError
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
		t.Fatalf("switchyard-cni failed without a JSON error: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return &e, stdout.String()
}

func diffFootprint(a, b footprint) string { return cmp.Diff(a, b, cmp.AllowUnexported(footprint{})) }

// createNetns makes a pod namespace removed on cleanup.
func createNetns(t *testing.T, role string) string { return netns.Create(t, testenv.Name(role)) }

func mustPod(t *testing.T, c *cluster.Cluster, n *cluster.Node, name string) *cluster.Pod {
	t.Helper()
	return c.AddPod(t, cluster.PodSpec{Name: name, Node: n})
}
