package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/testenv"
)

// gammaClient talks to the gamma test plugin's control socket: every call
// makes the real plugin process call the SDK (Host.Flows, Apply, ...).
type gammaClient struct {
	t    *testing.T
	sock string
}

func (g gammaClient) do(method, path string, v any) error {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", g.sock)
		}}}
	req, err := http.NewRequest(method, "http://gamma"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Status, ": ")
		buf := make([]byte, 2048)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return fmt.Errorf("%s %s: %s", method, path, b.String())
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type gammaFlow struct {
	Flow    string `json:"flow"`
	Table   string `json:"table"`
	Tag     uint32 `json:"tag"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

func (g gammaClient) flows(query string) []gammaFlow {
	g.t.Helper()
	var fs []gammaFlow
	if err := g.do("GET", "/flows?"+query, &fs); err != nil {
		g.t.Fatalf("gamma read-back: %v", err)
	}
	return fs
}

func findFlow(fs []gammaFlow, substr string) (gammaFlow, bool) {
	for _, f := range fs {
		if strings.Contains(f.Flow, substr) {
			return f, true
		}
	}
	return gammaFlow{}, false
}

type counterJSON struct{ Packets, Bytes uint64 }

type statsJSON struct {
	ID      uint32
	Packets uint64
	Bytes   uint64
	Buckets []counterJSON
	Bands   []counterJSON
}

// ownFlowsOnSwitch counts the flows with prefix's cookie on the switch,
// and those whose tag is tag.
func (n *node) ownFlowsOnSwitch(prefix uint16, tag uint32) (all, tagged int, lines []string) {
	for _, f := range n.dumpFlows() {
		if uint16(f.Cookie>>48) != prefix {
			continue
		}
		all++
		lines = append(lines, f.Line)
		if uint32(f.Cookie) == tag {
			tagged++
		}
	}
	return all, tagged, lines
}

// TestSDKReadBackOverPluginProcess: a real plugin process reads its own
// flows back with counters that move with traffic, reads group and meter
// counters, gets packet-ins with its register fields, resumes a
// packet-out at a named table, hears about a flow the switch timed out,
// and deletes flows by tag; the switch (ovs-ofctl) and the host's flow
// store agree with it at every step.
func TestSDKReadBackOverPluginProcess(t *testing.T) {
	n := newNode(t)
	sock := filepath.Join(n.dir, "gamma.sock")
	n.writeConfig(pluginEntry{"gamma", bins.gamma, map[string]any{"ports": n.portsConfig(), "control": sock}, nil})
	n.startAgent("gamma")
	g := gammaClient{t: t, sock: sock}
	prefix := n.plugins()["gamma"].Prefix
	a := n.pods[0]

	all := g.flows("")
	for _, f := range all {
		t.Logf("read back: %s packets=%d", f.Flow, f.Packets)
	}
	wantIn := fmt.Sprintf("ip,in_port=%d actions=load:0x1->reg:gamma.mark,goto_table:@gamma.fwd", a.ofport)
	if _, ok := findFlow(all, wantIn); !ok {
		t.Fatalf("read-back lacks %q", wantIn)
	}
	onSwitch, _, lines := n.ownFlowsOnSwitch(prefix, 0)
	if len(all) != onSwitch {
		t.Errorf("read back %d flows, the switch holds %d with gamma's cookie:\n%s", len(all), onSwitch, strings.Join(lines, "\n"))
	}
	if fwd := g.flows("table=gamma.fwd"); len(fwd) != 2 {
		t.Errorf("read-back of table gamma.fwd: %d flows, want 2: %+v", len(fwd), fwd)
	}

	// Counters move with traffic: a -> b goes through the in_port flow,
	// the mark=1 flow, the meter and the group.
	before, _ := findFlow(g.flows("tag=0x100&mask=0xffffffff"), wantIn)
	_, rx, out := n.ping(0, 1, 5, "0.1")
	if rx == 0 {
		t.Fatalf("pod a cannot reach pod b through gamma: %s", out)
	}
	// Every answered ping crossed a -> b once. The switch's counters lag
	// the datapath (its revalidators update them), so wait for them.
	var groups, meters []statsJSON
	if err := testenv.Eventually(fmt.Sprintf("read-back counters count the %d answered pings", rx), 10*time.Second, 100*time.Millisecond, func() error {
		after, ok := findFlow(g.flows("tag=0x100&mask=0xffffffff"), wantIn)
		if !ok || after.Packets < before.Packets+uint64(rx) || after.Bytes <= before.Bytes {
			return fmt.Errorf("in_port flow: before %+v after %+v", before, after)
		}
		if err := g.do("GET", "/groups", &groups); err != nil || len(groups) != 1 || groups[0].ID != 1 || groups[0].Packets < uint64(rx) || groups[0].Buckets[0].Packets < uint64(rx) {
			return fmt.Errorf("group read-back = %+v, %v", groups, err)
		}
		if err := g.do("GET", "/meters", &meters); err != nil || len(meters) != 1 || meters[0].ID != 1 || meters[0].Packets < uint64(rx) {
			return fmt.Errorf("meter read-back = %+v, %v", meters, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if len(groups) != 1 {
		t.FailNow()
	}

	// Packet-in carries gamma's register field; the packet-out resumes at
	// gamma.fwd (its mark=1 flow and group count the re-injected packets),
	// and a packet-out to a table gamma may not write is refused, named.
	if _, err := testenv.Run("ip", "-n", a.ns, "neigh", "replace", puntIP, "lladdr", "02:00:00:00:00:99", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	groupBefore := groups[0].Packets
	_, _ = netnsPing(a.ns, puntIP, 3)
	type pin struct {
		Table          string
		Tag            uint32
		InPort         uint32
		Fields         map[string]uint32
		PacketOutError string
		RefusedResume  string `json:"refusedResumeError"`
		CTState        uint32
		CTZone         uint16
		CTSrc, CTDst   string
		CTProto        uint8
	}
	var pins []pin
	if err := testenv.Eventually("gamma got packet-ins", 10*time.Second, 50*time.Millisecond, func() error {
		if err := g.do("GET", "/packetins", &pins); err != nil {
			return err
		}
		if len(pins) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p0 := pins[0]
	if p0.Table != "gamma.punt" || p0.Tag != 0x200 || p0.InPort != a.ofport || p0.Fields["gamma.mark"] != 0x5a || p0.PacketOutError != "" {
		t.Errorf("packet-in = %+v; want table gamma.punt, tag 0x200, in_port %d, gamma.mark 0x5a, packet-out accepted", p0, a.ofport)
	}
	// ct_state +trk (0x20) +new (0x1), zone 1 (the first zone the host
	// grants, and gamma is the only plugin asking for one), the ICMP tuple.
	if p0.CTState&0x21 != 0x21 || p0.CTZone != 1 || p0.CTSrc != a.ip || p0.CTDst != puntIP || p0.CTProto != 1 {
		t.Errorf("packet-in ct state = %+v; want +new+trk, zone 1, tuple %s -> %s icmp", p0, a.ip, puntIP)
	}
	if !strings.Contains(p0.RefusedResume, `plugin "gamma"`) || !strings.Contains(p0.RefusedResume, `"no.such.table"`) {
		t.Errorf("packet-out to an unknown table: error %q does not name plugin and table", p0.RefusedResume)
	}
	if err := testenv.Eventually("re-injected packets counted by gamma.fwd's group", 5*time.Second, 50*time.Millisecond, func() error {
		if err := g.do("GET", "/groups", &groups); err != nil {
			return err
		}
		if len(groups) != 1 || groups[0].Packets < groupBefore+uint64(len(pins)) {
			return fmt.Errorf("group packets %+v, want >= %d", groups, groupBefore+uint64(len(pins)))
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	// The idle-timeout flow leaves the switch, the store and tells gamma.
	var removed []string
	if err := testenv.Eventually("switch timed out the idle flow and told gamma", 15*time.Second, 100*time.Millisecond, func() error {
		if err := g.do("GET", "/removed", &removed); err != nil {
			return err
		}
		if len(removed) == 0 || !strings.Contains(removed[0], "nw_dst=10.9.9.9") {
			return fmt.Errorf("removed = %v", removed)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	onSwitch, _, lines = n.ownFlowsOnSwitch(prefix, 0)
	if st := n.plugins()["gamma"].Flows; st != onSwitch {
		t.Errorf("after the timeout the host's store holds %d flows of gamma, the switch %d:\n%s", st, onSwitch, strings.Join(lines, "\n"))
	}

	// Delete by tag: b's flows (tag 0x101) go, a's stay; replies from b
	// no longer pass.
	var ok2 string
	if err := g.do("POST", "/delete?tag=0x101&mask=0xffffffff", &ok2); err != nil {
		t.Fatal(err)
	}
	all2, tagged, lines := n.ownFlowsOnSwitch(prefix, 0x101)
	if tagged != 0 || all2 == 0 {
		t.Errorf("after delete-by-tag 0x101 the switch holds %d such flows (of %d):\n%s", tagged, all2, strings.Join(lines, "\n"))
	}
	if left := g.flows("tag=0x101&mask=0xffffffff"); len(left) != 0 {
		t.Errorf("read-back still shows tag 0x101: %+v", left)
	}
	if _, ok := findFlow(g.flows("tag=0x100&mask=0xffffffff"), wantIn); !ok {
		t.Errorf("delete of tag 0x101 took a's flow too")
	}
	if st := n.plugins()["gamma"].Flows; st != all2 {
		t.Errorf("after delete-by-tag the host's store holds %d flows of gamma, the switch %d", st, all2)
	}
	if _, rx, _ := n.ping(0, 1, 2, "0.1"); rx != 0 {
		t.Errorf("pings still answered with b's flows deleted")
	}
	// A masked delete: every port flow (0x1xx) goes, the two punt flows
	// (0x200) stay.
	if err := g.do("POST", "/delete?tag=0x100&mask=0xff00", &ok2); err != nil {
		t.Fatal(err)
	}
	rest := g.flows("")
	if len(rest) != 2 || rest[0].Tag != 0x200 || rest[1].Tag != 0x200 {
		t.Errorf("after the masked delete read-back shows %+v, want only the two punt flows", rest)
	}
	if all3, punts, lines := n.ownFlowsOnSwitch(prefix, 0x200); all3 != 2 || punts != 2 || n.plugins()["gamma"].Flows != 2 {
		t.Errorf("after the masked delete: switch %d, store %d flows of gamma, want the 2 punt flows:\n%s", all3, n.plugins()["gamma"].Flows, strings.Join(lines, "\n"))
	}
}
