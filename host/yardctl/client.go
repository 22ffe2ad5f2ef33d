package yardctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// ExitError carries a process exit code with its message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes.
const (
	ExitFailure      = 1
	ExitUsage        = 2
	ExitUnreachable  = 3
	ExitNotDelivered = 4
)

// client talks to one agent's API socket.
type client struct {
	socket string
	http   *http.Client
}

func newClient(socket string, timeout time.Duration) *client {
	return &client{socket: socket, http: &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}}
}

func (c *client) unreachable(err error) error {
	if _, serr := os.Stat(c.socket); errors.Is(serr, os.ErrNotExist) {
		return &ExitError{ExitUnreachable, fmt.Errorf("the agent socket %s is not there: is switchyard-agent running on this node? (or pass --socket)", c.socket)}
	}
	return &ExitError{ExitUnreachable, fmt.Errorf("the agent at %s does not answer: %v (is switchyard-agent running and healthy?)", c.socket, err)}
}

// do sends a request and returns the body of a 2xx answer; other answers
// become errors carrying the agent's message.
func (c *client) do(ctx context.Context, method, path string, in any) ([]byte, int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, body)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, c.unreachable(err)
	}
	return b, resp.StatusCode, nil
}

// get decodes a JSON answer into out.
func (c *client) get(ctx context.Context, path string, out any) error {
	b, code, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("agent: GET %s: %s", path, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("agent: GET %s: unexpected answer (is yardctl older than the agent?): %v", path, err)
	}
	return nil
}
