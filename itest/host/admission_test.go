package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/sdk"
)

// TestAdmission checks the host's promises about when a plugin is called:
// nothing reaches it before its Start returned (beta's Start blocks here
// while a pod appears), it is then given the pods it missed, and a later
// incarnation (after a crash) is given every pod again.
func TestAdmission(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	dir := testenv.Dir(t, "admission")
	block, events := filepath.Join(dir, "block"), filepath.Join(dir, "events")
	if err := os.WriteFile(block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, started := startInProcess(t, n, pluginEntry{name: "beta", path: bins.beta, config: map[string]any{"startBlock": block, "eventLog": events}})
	waitFile(t, block+".entered")

	pod := func(id string) sdk.PodInterfaceEventRequest {
		return sdk.PodInterfaceEventRequest{Kind: sdk.PodInterfaceAdded, Interface: sdk.PodInterface{PodNamespace: "ns", PodName: id, ContainerID: id, IfName: "eth0"}}
	}
	a.PodInterfaceEvent(ctx, pod("c1")) // beta is inside Start: held back, not delivered
	if got := eventLines(t, events); len(got) != 0 {
		t.Fatalf("beta got events while its Start was running: %q", got)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := a.WaitSynced(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	a.PodInterfaceEvent(ctx, pod("c2"))
	pid1 := pluginPID(t, a, "beta")
	want := []string{fmt.Sprintf("%d after-start 1 c1", pid1), fmt.Sprintf("%d after-start 1 c2", pid1)}
	if got := eventLines(t, events); !slices.Equal(got, want) {
		t.Fatalf("events of the first incarnation:\n got %q\nwant %q", got, want)
	}

	// A crash: the next incarnation gets both pods again, after its Start.
	if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var pid2 int
	err := testenv.Eventually("beta to run again", 30*time.Second, 50*time.Millisecond, func() error {
		for _, p := range a.Plugins() {
			if p.Name == "beta" && p.PID != pid1 && p.PID != 0 && p.State == agent.StateSynced {
				pid2 = p.PID
				return nil
			}
		}
		return errors.New("not yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	// The replay runs after Start, alongside the plugin's own sync, so the
	// second event may land a moment after Synced.
	want = []string{fmt.Sprintf("%d after-start 1 c1", pid2), fmt.Sprintf("%d after-start 1 c2", pid2)}
	var again []string
	err = testenv.Eventually("both pods replayed to the restarted beta", 10*time.Second, 20*time.Millisecond, func() error {
		again = again[:0]
		for _, l := range eventLines(t, events) {
			if strings.HasPrefix(l, fmt.Sprint(pid2)+" ") {
				again = append(again, l)
			}
		}
		if len(again) < len(want) {
			return fmt.Errorf("%d of %d so far", len(again), len(want))
		}
		return nil
	})
	if err != nil || !slices.Equal(again, want) {
		t.Errorf("events replayed to the restarted beta:\n got %q\nwant %q", again, want)
	}
}

// TestSecondCNIPluginRefused loads two plugins that both claim CNI; the
// second is refused at load, and its status names both.
func TestSecondCNIPluginRefused(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	a, started := startInProcess(t, n,
		pluginEntry{name: "cni1", path: bins.beta, args: []string{"-cni", "-name", "cni1"}, config: map[string]any{}},
		pluginEntry{name: "cni2", path: bins.beta, args: []string{"-cni", "-name", "cni2"}, config: map[string]any{}})
	<-started
	if err := a.WaitSynced(context.Background(), "cni1"); err != nil {
		t.Fatal(err)
	}
	err := a.WaitSynced(context.Background(), "cni2")
	want := `plugin "cni2" handles CNI, but plugin "cni1" already does on this node; a node has one CNI plugin: disable one of them`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second CNI plugin: %v, want an error containing %q", err, want)
	}
	for _, p := range a.Plugins() {
		if p.Name == "cni2" && (p.State != agent.StateFailed || !strings.Contains(p.LastError, want)) {
			t.Errorf("cni2 status %+v, want failed with %q", p, want)
		}
	}
	if p, ok := a.CNIPlugin(); !ok || p == nil {
		t.Errorf("cni1 should still handle CNI")
	}
}

// TestDescribeFailureIsPermanent: a plugin whose Describe fails is marked
// failed at once, with the reason, without restarts, and the plugin after
// it in config order starts.
func TestDescribeFailureIsPermanent(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	a, started := startInProcess(t, n,
		pluginEntry{name: "bad", path: bins.beta, args: []string{"-name", "bad", "-describe-error"}, config: map[string]any{}},
		pluginEntry{name: "good", path: bins.beta, args: []string{"-name", "good"}, config: map[string]any{}})
	<-started
	if err := a.WaitSynced(context.Background(), "good"); err != nil {
		t.Fatal(err)
	}
	want := "describe: invalid request: plugin bad was told to refuse to describe itself (the plugin answered, so a restart would not help"
	for _, p := range a.Plugins() {
		if p.Name == "bad" && (p.State != agent.StateFailed || p.Restarts != 0 || !strings.Contains(p.LastError, want)) {
			t.Errorf("bad: state %s, restarts %d, last error %q; want failed, 0 restarts, %q", p.State, p.Restarts, p.LastError, want)
		}
	}
}

// startInProcess runs the agent in the test process (so the test can hand
// it pod events) and starts it in the background: Start returns only after
// every plugin's first start attempt. started is closed when it returned.
func startInProcess(t *testing.T, n *node, plugins ...pluginEntry) (*agent.Agent, <-chan struct{}) {
	t.Helper()
	a, _ := newInProcessAgent(t, n, plugins...)
	started := make(chan struct{})
	go func() {
		defer close(started)
		if err := a.Start(context.Background()); err != nil {
			t.Errorf("agent start: %v", err)
		}
	}()
	t.Cleanup(func() { <-started; a.Stop() })
	return a, started
}

func pluginPID(t *testing.T, a *agent.Agent, name string) int {
	t.Helper()
	for _, p := range a.Plugins() {
		if p.Name == name {
			return p.PID
		}
	}
	t.Fatalf("plugin %s not enabled", name)
	return 0
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	if err := testenv.Eventually(path+" to appear", 30*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(path)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func eventLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
