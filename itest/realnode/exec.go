package realnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	//lint:ignore SA1019 the fallback test kubectl uses (websocket, else SPDY) needs its upgrade-failure checks; k8s.io/streaming would be one more module for two functions
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// The apiserver runs in the host's network namespace, the kubelets in the
// nodes', which only the fabric reaches. A real cluster whose control plane
// sits on another network than its nodes has the same problem and the same
// answer: the apiserver's "cluster" egress (every connection it opens to a
// kubelet, a pod or a Service: pods/exec, pods/log, proxies) goes through
// an HTTP CONNECT proxy named in an egress selector configuration. Ours
// listens on a unix socket and dials from inside the fabric namespace.

// startKubeletProxy serves the CONNECT proxy on a socket in dir and returns
// the kube-apiserver arguments that send its cluster egress there. Kubelets
// are addressed by their InternalIP (the node's eth0 on the fabric): their
// Hostname address (the node name) resolves nowhere.
func startKubeletProxy(t testenv.T, dir, fabric string) []string {
	t.Helper()
	sock := filepath.Join(dir, "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("egress proxy: %v", err)
	}
	cfg := filepath.Join(dir, "egress-selector.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sock)), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cluster.Relay(t, l, func(in net.Conn) net.Conn { return connectThrough(in, fabric) })
	return []string{"--egress-selector-config-file=" + cfg, "--kubelet-preferred-address-types=InternalIP"}
}

// connectThrough reads one CONNECT request from in, dials its target from
// inside namespace ns and answers 200; it closes in and returns nil when
// either fails.
func connectThrough(in net.Conn, ns string) net.Conn {
	in.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(in)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		in.Close()
		return nil
	}
	in.SetReadDeadline(time.Time{})
	out, err := netns.Dial(ns, "tcp", req.Host, 5*time.Second)
	if err != nil {
		fmt.Fprintf(in, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		in.Close()
		return nil
	}
	if _, err := io.WriteString(in, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		in.Close()
		out.Close()
		return nil
	}
	// The client speaks only after the 200 (TLS), so nothing is buffered;
	// pass on whatever is, all the same.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		out.Write(b)
	}
	return out
}

// ExecResult is what a command run in a container said and how it ended.
type ExecResult struct {
	Stdout, Stderr string
	// ExitCode is the command's exit status; -1 when the exec itself
	// failed (Err says why) and no status came back.
	ExitCode int
	Err      error
}

// Exec runs cmd in a container of pod ns/name the way `kubectl exec` does:
// pods/exec through the apiserver, which opens the stream to the pod's
// kubelet, which asks containerd's CRI streaming server to run it. It
// returns when the command ended or ctx is done.
func (c *Cluster) Exec(ctx context.Context, ns, name, container string, cmd ...string) ExecResult {
	req := c.CP.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	// WebSockets first (what kubectl speaks today), SPDY when the upgrade
	// is refused.
	ws, err := remotecommand.NewWebSocketExecutor(c.CP.Config, "GET", req.URL().String())
	if err != nil {
		return ExecResult{ExitCode: -1, Err: err}
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.CP.Config, "POST", req.URL())
	if err != nil {
		return ExecResult{ExitCode: -1, Err: err}
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return ExecResult{ExitCode: -1, Err: err}
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	r := ExecResult{Stdout: stdout.String(), Stderr: strings.TrimSpace(stderr.String())}
	var exit utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		r.ExitCode = exit.ExitStatus()
	default:
		r.ExitCode, r.Err = -1, err
	}
	return r
}
