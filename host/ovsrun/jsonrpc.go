package ovsrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// call sends one JSON-RPC 1.0 request (the protocol of OVSDB, RFC 7047,
// and of OVS's unixctl sockets) and checks the answer is a result, not an
// error. Enough to tell a live daemon from a stale socket.
func call(c net.Conn, method string) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	req := map[string]any{"id": 0, "method": method, "params": []any{}}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return err
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if len(resp.Error) > 0 && string(resp.Error) != "null" {
		return fmt.Errorf("%s: %s", method, resp.Error)
	}
	if len(resp.Result) == 0 || string(resp.Result) == "null" {
		return fmt.Errorf("%s: no result", method)
	}
	return nil
}

// pollUntil polls cond every 20 ms for up to 10 s.
func pollUntil(ctx context.Context, cond func() bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
