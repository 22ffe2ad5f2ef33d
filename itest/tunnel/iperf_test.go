package tunnel

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// iperfResult is the part of iperf3's JSON report the tests read.
type iperfResult struct {
	Error     string `json:"error"`
	Intervals []struct {
		Sum struct {
			Start       float64 `json:"start"`
			Bytes       int64   `json:"bytes"`
			Retransmits int     `json:"retransmits"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent struct {
			Bytes         int64   `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
	} `json:"end"`
}

// iperfServe starts a one-shot iperf3 server bound to ip inside ns.
func iperfServe(ns, ip string) {
	netns.Exec(ns, "iperf3", "-s", "-1", "-D", "-B", ip)
	time.Sleep(100 * time.Millisecond)
}

// iperfClient is an iperf3 client run in the background.
type iperfClient struct {
	cmd *exec.Cmd
	out strings.Builder
}

// startIperf runs iperf3 -c dst from ns for secs seconds, with extra args.
func startIperf(ns, dst string, secs int, extra ...string) (*iperfClient, error) {
	c := &iperfClient{}
	args := append([]string{"netns", "exec", ns, "iperf3", "-c", dst, "-t", strconv.Itoa(secs), "-J"}, extra...)
	c.cmd = exec.Command("ip", args...)
	c.cmd.Stdout = &c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return c, c.cmd.Start()
}

func (c *iperfClient) wait() (iperfResult, error) {
	err := c.cmd.Wait()
	var r iperfResult
	if jerr := json.Unmarshal([]byte(c.out.String()), &r); jerr != nil {
		return r, fmt.Errorf("iperf3: %v; report unreadable: %v\n%s", err, jerr, c.out.String())
	}
	if r.Error != "" || err != nil {
		return r, fmt.Errorf("iperf3: %v %s", err, r.Error)
	}
	return r, nil
}

// iperfRun runs one stream of secs seconds from ns to dst (served in
// dstNS), retrying a run that did not start (the server not listening
// yet).
func iperfRun(t testenv.T, ns, dstNS, dst string, secs int, extra ...string) iperfResult {
	t.Helper()
	var last error
	for range 20 {
		iperfServe(dstNS, dst)
		c, err := startIperf(ns, dst, secs, extra...)
		if err == nil {
			var r iperfResult
			if r, err = c.wait(); err == nil && r.End.SumSent.Bytes > 0 {
				return r
			}
		}
		last = err
		stopIperf(dstNS)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("iperf3 %s -> %s never completed a run: %v", ns, dst, last)
	return iperfResult{}
}

// stopIperf kills iperf3 processes inside ns, found by pid from `ip netns
// pids` (iperf3 runs elsewhere on the machine are left alone).
func stopIperf(ns string) {
	out, err := testenv.Run("ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, pid := range strings.Fields(out) {
		if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "iperf3" {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	}
}
