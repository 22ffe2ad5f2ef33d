package kube

import (
	"encoding/base64"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
)

func node(name string, cidrs []string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	for _, ip := range ips {
		typ := corev1.NodeInternalIP
		if strings.HasPrefix(ip, "ext:") {
			typ, ip = corev1.NodeExternalIP, strings.TrimPrefix(ip, "ext:")
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: typ, Address: ip})
	}
	return n
}

func fixedUplink(name string, mtu int) UplinkFunc {
	return func(netip.Addr) (string, int, error) { return name, mtu, nil }
}

func TestFacts(t *testing.T) {
	base := sdk.NodeFacts{Name: "n1", Bridge: "br-int"}
	noUplink := func(netip.Addr) (string, int, error) { return "", 0, errors.New("gone") }
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		ov      config.Node
		uplink  UplinkFunc
		want    sdk.NodeFacts
		wantErr error
		errHas  string
		warnHas string
	}{
		{name: "from the Node", node: node("n1", []string{"10.244.1.0/24", "fd00::/64"}, "198.18.0.1", "ext:203.0.113.1"), uplink: fixedUplink("eth0", 1500),
			want: sdk.NodeFacts{Name: "n1", Bridge: "br-int", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00::/64")},
				NodeIPs: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("203.0.113.1")}, MTU: 1500, Uplink: "eth0"}},
		{name: "config overrides", node: node("n1", []string{"10.244.1.0/24"}, "198.18.0.1"), uplink: fixedUplink("eth0", 9000),
			ov: config.Node{PodCIDRs: []string{"10.9.0.0/24"}, NodeIPs: []string{"198.18.0.7"}, MTU: 1400},
			want: sdk.NodeFacts{Name: "n1", Bridge: "br-int", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")},
				NodeIPs: []netip.Addr{netip.MustParseAddr("198.18.0.7")}, MTU: 1400, Uplink: "eth0"}},
		{name: "no pod CIDR yet", node: node("n1", nil, "198.18.0.1"), uplink: fixedUplink("eth0", 1500),
			wantErr: ErrNoPodCIDR, errHas: "--allocate-node-cidrs"},
		{name: "pod CIDR overlaps node IP", node: node("n1", []string{"198.18.0.0/24"}, "198.18.0.1"), uplink: fixedUplink("eth0", 1500),
			wantErr: ErrBadFacts, errHas: "pod CIDR 198.18.0.0/24 contains the node's own address 198.18.0.1"},
		{name: "uplink not found", node: node("n1", []string{"10.244.1.0/24"}, "198.18.0.1"), uplink: noUplink,
			want: sdk.NodeFacts{Name: "n1", Bridge: "br-int", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
				NodeIPs: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, MTU: 1500}, warnHas: "set node.mtu to override"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, err := Observe(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got, warn, err := Facts(base, obs, tc.ov, tc.uplink)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %v naming %q", err, tc.wantErr, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.warnHas != "" && !strings.Contains(warn, tc.warnHas) {
				t.Errorf("warning %q does not say %q", warn, tc.warnHas)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObserveNamesBadField(t *testing.T) {
	_, err := Observe(node("n1", []string{"10.244.1.0/33"}))
	if !errors.Is(err, ErrBadFacts) || !strings.Contains(err.Error(), "spec.podCIDRs[0]") {
		t.Errorf("err = %v", err)
	}
}

type recorder struct {
	own    []*corev1.Node
	events []string
}

func (r *recorder) OwnNode(n *corev1.Node) { r.own = append(r.own, n) }
func (r *recorder) NodeEvent(k sdk.NodeEventKind, i sdk.NodeInfo) {
	r.events = append(r.events, []string{"", "added", "updated", "deleted"}[k]+" "+i.Name+" "+addrs(i))
}

func addrs(i sdk.NodeInfo) string {
	var s []string
	for _, ip := range i.NodeIPs {
		s = append(s, ip.String())
	}
	for _, p := range i.PodCIDRs {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

// A relist reports every node again; only real differences become events,
// and the agent's own Node goes to OwnNode, never to node events.
func TestWatchForwardsOnlyRealChanges(t *testing.T) {
	r := &recorder{}
	w := &Watch{self: "n1", h: r, sent: map[string]sdk.NodeInfo{}}
	n2 := node("n2", []string{"10.244.2.0/24"}, "198.18.0.2")
	w.upsert(node("n1", []string{"10.244.1.0/24"}, "198.18.0.1"))
	w.upsert(n2)
	w.upsert(n2.DeepCopy()) // relist, unchanged
	n2b := n2.DeepCopy()
	n2b.Status.Addresses = append(n2b.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n2"})
	w.upsert(n2b) // a field node events do not carry
	w.upsert(node("n2", []string{"10.244.2.0/24"}, "198.18.0.22"))
	w.deleted(node("n3", nil)) // never reported
	w.deleted(n2)
	w.deleted(node("n1", nil))
	want := []string{"added n2 198.18.0.2,10.244.2.0/24", "updated n2 198.18.0.22,10.244.2.0/24", "deleted n2 198.18.0.22,10.244.2.0/24"}
	if diff := cmp.Diff(want, r.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(r.own) != 2 || r.own[0].Name != "n1" || r.own[1] != nil {
		t.Errorf("own node calls = %v", r.own)
	}
}

func jwt(payload string) string {
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
}

func TestTokenFileFollowsRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(jwt(`{"exp":2000000000}`)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := &TokenFile{Path: p}
	tok, exp, err := tf.Token()
	if err != nil || tok != jwt(`{"exp":2000000000}`) || exp.Unix() != 2000000000 {
		t.Fatalf("token %q exp %v err %v", tok, exp, err)
	}
	// kubelet rewrites the file; the new token is served from then on.
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(p, []byte(jwt(`{"exp":2000000600,"x":1}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(p, later, later)
	if tok, exp, _ = tf.Token(); exp.Unix() != 2000000600 || !strings.HasSuffix(tok, ".c2ln") {
		t.Errorf("after rotation: token %q exp %v", tok, exp)
	}
	if _, _, err := (&TokenFile{Path: p + ".missing"}).Token(); err == nil || !strings.Contains(err.Error(), "agent token file") {
		t.Errorf("missing file: err = %v", err)
	}
}

// FuzzExpiry: a token is untrusted bytes; reading its expiry must never
// panic.
func FuzzExpiry(f *testing.F) {
	f.Add(jwt(`{"exp":1}`))
	f.Add("a.b.c")
	f.Add("..")
	f.Add(jwt(`{"exp":"x"}`))
	f.Fuzz(func(t *testing.T, s string) { _ = Expiry(s) })
}
