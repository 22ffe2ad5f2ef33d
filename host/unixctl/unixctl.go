package unixctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Find returns the control socket of daemon (e.g. "ovs-vswitchd") in
// runDir: <daemon>.ctl where the daemon was started with that --unixctl
// path (as switchyard-ovs starts it), else <daemon>.<pid>.ctl, the
// default, with the pid from <daemon>.pid.
func Find(runDir, daemon string) (string, error) {
	named := filepath.Join(runDir, daemon+".ctl")
	if _, err := os.Stat(named); err == nil {
		return named, nil
	}
	pidFile := filepath.Join(runDir, daemon+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return "", fmt.Errorf("no control socket for %s in %s: neither %s nor a pid file (%w); is %s running with this run directory?",
			daemon, runDir, filepath.Base(named), err, daemon)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("%s: %q is not a pid", pidFile, strings.TrimSpace(string(b)))
	}
	return filepath.Join(runDir, fmt.Sprintf("%s.%d.ctl", daemon, pid)), nil
}

// Client is one connection to a daemon's control socket. Calls are
// serialised; a daemon answers them in order.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	next int
}

// Dial connects to the control socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("unixctl: %w", err)
	}
	return &Client{conn: c, dec: json.NewDecoder(bufio.NewReader(c))}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// ErrCommand marks an error the daemon answered (a bad argument, an
// unknown command), as opposed to a broken connection.
var ErrCommand = errors.New("command failed")

type request struct {
	ID     int      `json:"id"`
	Method string   `json:"method"`
	Params []string `json:"params"`
}

type response struct {
	ID     *int            `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// callTimeout bounds one command when ctx has no earlier deadline: a
// daemon stuck in its main loop must not stall the caller for ever.
const callTimeout = 5 * time.Second

// Call runs command with args and returns the daemon's answer. A
// command the daemon refused returns an error wrapping ErrCommand with
// its message; any other error means the connection is no longer usable.
func (c *Client) Call(ctx context.Context, command string, args ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline := time.Now().Add(callTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return "", fmt.Errorf("unixctl %s: %w", command, err)
	}
	c.next++
	if args == nil {
		args = []string{}
	}
	b, err := json.Marshal(request{ID: c.next, Method: command, Params: args})
	if err != nil {
		return "", fmt.Errorf("unixctl %s: %w", command, err)
	}
	if _, err := c.conn.Write(b); err != nil {
		return "", fmt.Errorf("unixctl %s: %w", command, err)
	}
	var resp response
	if err := c.dec.Decode(&resp); err != nil {
		return "", fmt.Errorf("unixctl %s: reading the answer: %w", command, err)
	}
	if resp.ID == nil || *resp.ID != c.next {
		return "", fmt.Errorf("unixctl %s: answer to request %v, want %d", command, resp.ID, c.next)
	}
	if isSet(resp.Error) {
		return "", fmt.Errorf("unixctl %s %s: %w: %s", command, strings.Join(args, " "), ErrCommand, text(resp.Error))
	}
	if !isSet(resp.Result) {
		return "", fmt.Errorf("unixctl %s: answer has neither result nor error", command)
	}
	var s string
	if err := json.Unmarshal(resp.Result, &s); err != nil {
		return "", fmt.Errorf("unixctl %s: result is not a string: %s", command, resp.Result)
	}
	return s, nil
}

func isSet(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// text is an error member as a message: a string unquoted, anything else
// as sent.
func text(m json.RawMessage) string {
	var s string
	if json.Unmarshal(m, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(m)
}
