package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/testenv"
)

// TestLoadUpgradeUnloadHitless runs a flood ping between two pods while a
// third-party plugin (the template, which blocks a TCP port in its own
// table between alpha's) is hot-loaded, upgraded in place (a new binary at
// the same path, then SIGHUP) and unloaded, three times over. Every layout
// change lands in one bundle, so not one ping may be lost. Unload is also
// reported done only once its flows are gone.
func TestLoadUpgradeUnloadHitless(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	n.writeConfig(n.alpha())
	n.startAgent("alpha")
	n.waitPing("ping before", 0, 1)

	// The template runs from a path of its own, so it can be rebuilt there.
	tmplPath := filepath.Join(testenv.Dir(t, "tmpl"), "template")
	install := func(extra string) {
		b, err := os.ReadFile(bins.template)
		if err != nil {
			t.Fatal(err)
		}
		// The same program with bytes appended: a different build (hash) at
		// the same path, as `go build -o` over the old file would leave.
		tmp := tmplPath + ".new"
		if err := os.WriteFile(tmp, append(b, extra...), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tmplPath); err != nil {
			t.Fatal(err)
		}
	}
	install("")
	tmpl := pluginEntry{name: "template", path: tmplPath, config: map[string]any{"blockTCPPorts": []int{23}}}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(n.agent.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	// Flood pings of 5000 back to back: each run ends when every reply is
	// in (or 1 s after the last request), so no packet still in flight is
	// miscounted as lost when the test stops pinging.
	var tx, rx int
	var summaries []string
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, _ := exec.Command("ip", "netns", "exec", n.pods[0].ns, "ping", "-n", "-q", "-f", "-c", "5000", "-W", "1", n.pods[1].ip).CombinedOutput()
			t1, r1, s := parsePing(string(out))
			tx, rx = tx+t1, rx+r1
			if t1 != r1 || t1 == 0 {
				summaries = append(summaries, s)
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-stopped
	})
	time.Sleep(500 * time.Millisecond)

	for i := range 3 {
		n.writeConfig(n.alpha(), tmpl)
		hup()
		pid := n.waitSynced("alpha", "template")["template"].PID

		install(fmt.Sprintf("build %d", i+1))
		hup()
		n.waitPlugins("template restarted on its new build", func(ps map[string]pluginStatus) error {
			if ps["template"].PID == pid {
				return errors.New("still the old process")
			}
			return nil
		}, "alpha", "template")
		prefix := n.plugins()["template"].Prefix

		n.writeConfig(n.alpha())
		hup()
		if err := testenv.Eventually("template unloaded", 30*time.Second, 20*time.Millisecond, func() error {
			st, listed := n.plugins()["template"]
			left := flowsOf(n.dumpFlows(), prefix)
			if listed {
				if st.State != "unloading" && st.State != "synced" {
					return fmt.Errorf("template is %s while unloading", st.State)
				}
				return errors.New("still listed")
			}
			if len(left) != 0 {
				return testenv.Permanent(fmt.Errorf("template no longer listed, but %d of its flows are on the switch: %v", len(left), left))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-stopped
	t.Logf("flood ping: %d sent, %d received", tx, rx)
	if tx == 0 || tx != rx {
		t.Errorf("flood ping lost %d of %d packets across 3 loads, upgrades and unloads:\n%s\nagent log:\n%s", tx-rx, tx, strings.Join(summaries, "\n"), n.agent.Tail(30))
	}
}
