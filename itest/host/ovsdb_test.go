package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/itest/ovs"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestOVSDBClient checks the host's OVSDB client against a real
// ovsdb-server and ovs-vswitchd, with ovs-vsctl as the witness.
func TestOVSDBClient(t *testing.T) {
	sw := ovs.Start(t, ovs.Options{Name: "db"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovsdb.Dial(ctx, sw.DBSock, "br-int", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("bridge is created with datapath type, secure fail mode and OpenFlow15", func(t *testing.T) {
		if err := c.EnsureBridge(ctx, "netdev"); err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(sw.Vsctl(t, "--columns=datapath_type,fail_mode,protocols", "--format=csv", "--no-headings", "list", "bridge", "br-int"))
		if got != `netdev,secure,[OpenFlow15]` {
			t.Errorf("bridge columns = %s", got)
		}
		sw.AddBridgeWait(t, "br-int")
	})

	t.Run("drifted bridge settings are fixed", func(t *testing.T) {
		sw.Vsctl(t, "set", "bridge", "br-int", "fail_mode=standalone", "protocols=OpenFlow13")
		if err := testenv.Eventually("client cache sees the drift", 5*time.Second, 20*time.Millisecond, func() error {
			if err := c.EnsureBridge(ctx, "netdev"); err != nil {
				return err
			}
			if got := strings.TrimSpace(sw.Vsctl(t, "get", "bridge", "br-int", "fail_mode")); got != "secure" {
				return errors.New("fail_mode " + got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("port with external_ids and requested ofport", func(t *testing.T) {
		if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "p0", Type: "internal", OFPort: 42, Owner: "alpha", ExternalIDs: map[string]string{"pod": "ns/a"}}); err != nil {
			t.Fatal(err)
		}
		ofport, err := c.WaitOFPort(ctx, "p0")
		if err != nil || ofport != 42 {
			t.Fatalf("WaitOFPort = %d, %v; want 42", ofport, err)
		}
		ext := sw.Vsctl(t, "get", "interface", "p0", "external_ids")
		if !strings.Contains(ext, `pod="ns/a"`) || !strings.Contains(ext, `switchyard-owner=alpha`) {
			t.Errorf("external_ids = %s", ext)
		}
		if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "p0", Type: "internal", Owner: "alpha"}); err != nil {
			t.Errorf("re-creating own port: %v", err)
		}
		if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "p0", Type: "internal", Owner: "beta"}); err == nil || !strings.Contains(err.Error(), `belongs to "alpha"`) {
			t.Errorf("another owner's port: err = %v", err)
		}
		ps, err := c.Ports(ctx, "alpha")
		if err != nil || len(ps) != 1 || ps[0].Name != "p0" || ps[0].OFPort != 42 {
			t.Errorf("Ports(alpha) = %+v, %v", ps, err)
		}
		// Re-creating it exported (an upgraded owner) exports it, and back.
		for _, exported := range []bool{true, false} {
			if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "p0", Type: "internal", Owner: "alpha", Exported: exported}); err != nil {
				t.Fatal(err)
			}
			p, err := c.Port(ctx, "p0")
			if err != nil || p.Exported != exported || p.ExternalIDs["pod"] != "ns/a" {
				t.Errorf("after re-creating with Exported=%v: %+v, %v", exported, p, err)
			}
		}
	})

	t.Run("label port: set, unset, and an unchanged label changes nothing", func(t *testing.T) {
		// ovs-vswitchd reconfigures on every change of the database, and
		// podnet labels its warm pods' ports again at every start: a label
		// that is there already must leave the rows as they are. The Port
		// row's _version, new after every change to it, is the witness.
		version := func() string {
			out, err := testenv.Run("ovsdb-client", "--format=csv", "--no-headings", "transact", sw.DBSock,
				`["Open_vSwitch",{"op":"select","table":"Port","where":[["name","==","p0"]],"columns":["_version"]}]`)
			if err != nil {
				t.Fatalf("ovsdb-client: %v %s", err, out)
			}
			return out
		}
		labels := map[string]string{"switchyard.dev/pod": "ns/b"}
		if err := c.LabelPort(ctx, "p0", labels); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"port", "interface"} {
			if ext := sw.Vsctl(t, "get", table, "p0", "external_ids"); !strings.Contains(ext, `"switchyard.dev/pod"="ns/b"`) || !strings.Contains(ext, `switchyard-owner=alpha`) {
				t.Errorf("%s external_ids after LabelPort = %s", table, ext)
			}
		}
		var before string
		if err := testenv.Eventually("the client's cache to hold the label", 5*time.Second, 20*time.Millisecond, func() error {
			before = version()
			if err := c.LabelPort(ctx, "p0", labels); err != nil {
				return err
			}
			if after := version(); after != before {
				return fmt.Errorf("an unchanged label changed the Port row: _version %s, then %s", strings.TrimSpace(before), strings.TrimSpace(after))
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		if err := c.LabelPort(ctx, "p0", map[string]string{"switchyard.dev/pod": ""}); err != nil {
			t.Fatal(err)
		}
		if ext := sw.Vsctl(t, "get", "port", "p0", "external_ids"); strings.Contains(ext, "switchyard.dev/pod") {
			t.Errorf("external_ids after unsetting the label = %s", ext)
		}
		if version() == before {
			t.Error("removing the label did not change the Port row")
		}
	})

	t.Run("a port vswitchd cannot open reports its error", func(t *testing.T) {
		if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "nosuchdev0", Owner: "alpha"}); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.WaitOFPort(wctx, "nosuchdev0"); err == nil || !strings.Contains(err.Error(), "could not add it") {
			t.Errorf("WaitOFPort on a missing device: %v", err)
		}
		if err := c.DeletePort(ctx, "nosuchdev0"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("picked OpenFlow port numbers are free, rising, and given", func(t *testing.T) {
		// A port another manager added (vsctl picks its number in
		// ovs-vswitchd) is seen as taken too.
		sw.Vsctl(t, "add-port", "br-int", "foreign0", "--", "set", "interface", "foreign0", "type=internal", "ofport_request=50")
		var prev uint32
		for i, name := range []string{"pick0", "pick1"} {
			var no uint32
			if err := testenv.Eventually("the cache to see foreign0", 5*time.Second, 20*time.Millisecond, func() error {
				var err error
				if no, err = c.PickOFPort(ctx); err != nil {
					return testenv.Permanent(err)
				}
				if i == 0 && no <= 50 {
					return fmt.Errorf("picked %d, at or below foreign0's 50", no)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if no <= prev {
				t.Errorf("picked %d after %d: numbers must rise", no, prev)
			}
			prev = no
			created, err := c.EnsurePort(ctx, ovsdb.PortSpec{Name: name, Type: "internal", OFPort: no, Owner: "alpha"})
			if err != nil || created != no {
				t.Fatalf("EnsurePort(%s) = %d, %v; want created with %d", name, created, err, no)
			}
			if got, err := c.WaitOFPort(ctx, name); err != nil || got != no {
				t.Errorf("%s: WaitOFPort = %d, %v; want the picked %d", name, got, err, no)
			}
			p, err := c.Port(ctx, name)
			if err != nil || p.OFPortRequest != int(no) {
				t.Errorf("%s: Port = %+v, %v; want OFPortRequest %d", name, p, err, no)
			}
			if created, err := c.EnsurePort(ctx, ovsdb.PortSpec{Name: name, Type: "internal", Owner: "alpha"}); err != nil || created != 0 {
				t.Errorf("EnsurePort(%s) again = %d, %v; want an existing port (0), no error", name, created, err)
			}
		}
		for _, name := range []string{"pick0", "pick1"} {
			if err := c.DeletePort(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		sw.Vsctl(t, "del-port", "br-int", "foreign0")
	})

	t.Run("a port on a missing bridge is refused", func(t *testing.T) {
		other, err := ovsdb.Dial(ctx, sw.DBSock, "br-missing", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.EnsurePort(ctx, ovsdb.PortSpec{Name: "lost0", Type: "internal", Owner: "alpha"}); err == nil || !strings.Contains(err.Error(), `bridge "br-missing" does not exist`) {
			t.Errorf("EnsurePort on a missing bridge: %v", err)
		}
		if out := sw.Vsctl(t, "--columns=name", "list", "interface"); strings.Contains(out, "lost0") {
			t.Errorf("the refused port's interface row stayed:\n%s", out)
		}
	})

	t.Run("delete port", func(t *testing.T) {
		if err := c.DeletePort(ctx, "p0"); err != nil {
			t.Fatal(err)
		}
		if out, _ := sw.OfctlE("show", "br-int"); strings.Contains(out, "(p0)") {
			t.Errorf("p0 still on the bridge:\n%s", out)
		}
		if err := c.DeletePort(ctx, "p0"); err != nil {
			t.Errorf("deleting a missing port: %v", err)
		}
	})

	t.Run("flow-restore-wait", func(t *testing.T) {
		if err := c.SetFlowRestoreWait(ctx, true); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(sw.Vsctl(t, "get", "open_vswitch", ".", "other_config:flow-restore-wait")); got != `"true"` {
			t.Errorf("flow-restore-wait = %s", got)
		}
		if err := testenv.Eventually("client sees flow-restore-wait", 5*time.Second, 20*time.Millisecond, func() error {
			if on, err := c.FlowRestoreWait(ctx); err != nil || !on {
				return errors.New("not set yet")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetFlowRestoreWait(ctx, false); err != nil {
			t.Fatal(err)
		}
		if out, _ := sw.OfctlE("show", "br-int"); out == "" {
			t.Errorf("bridge unusable after clearing flow-restore-wait")
		}
		if got := sw.Vsctl(t, "get", "open_vswitch", ".", "other_config"); strings.Contains(got, "flow-restore-wait") {
			t.Errorf("flow-restore-wait not cleared: %s", got)
		}
	})
}
