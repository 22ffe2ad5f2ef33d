package unixctl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve answers each request on a unix socket with answer(req); the
// socket is the seam the real daemon sits behind.
func serve(t *testing.T, answer func(req map[string]any) string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.ctl")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				dec := json.NewDecoder(c)
				for {
					var req map[string]any
					if dec.Decode(&req) != nil {
						return
					}
					if _, err := c.Write([]byte(answer(req))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}

func TestCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  string // %d is the request id
		want    string
		wantErr string
		command bool // the error wraps ErrCommand
	}{
		{name: "result", answer: `{"id":ID,"result":"OK\n","error":null}`, want: "OK\n"},
		{name: "refused", answer: `{"id":ID,"result":null,"error":"Invalid parameters"}`, wantErr: "Invalid parameters", command: true},
		{name: "answer to another request", answer: `{"id":99,"result":"OK","error":null}`, wantErr: "want 1"},
		{name: "result not a string", answer: `{"id":ID,"result":[1],"error":null}`, wantErr: "not a string"},
		{name: "empty answer", answer: `{"id":ID}`, wantErr: "neither result nor error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]any
			sock := serve(t, func(req map[string]any) string {
				got = req
				id, _ := json.Marshal(req["id"])
				return strings.ReplaceAll(tc.answer, "ID", string(id))
			})
			c, err := Dial(context.Background(), sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			out, err := c.Call(context.Background(), "ovs/route/add", "10.0.0.0/24", "br-phy")
			if tc.wantErr == "" {
				if err != nil || out != tc.want {
					t.Fatalf("Call = %q, %v; want %q", out, err, tc.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, ErrCommand) != tc.command {
				t.Fatalf("Call error %v, want one containing %q (command error: %v)", err, tc.wantErr, tc.command)
			}
			if got["method"] != "ovs/route/add" || len(got["params"].([]any)) != 2 {
				t.Errorf("daemon received %v", got)
			}
		})
	}
}

func TestCallWithoutArgumentsSendsEmptyParams(t *testing.T) {
	var params any
	sock := serve(t, func(req map[string]any) string {
		params = req["params"]
		return `{"id":1,"result":"3.1.0","error":null}`
	})
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(context.Background(), "version"); err != nil {
		t.Fatal(err)
	}
	if p, ok := params.([]any); !ok || len(p) != 0 {
		t.Errorf("params %#v, want [] (OVS rejects null)", params)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, "ovs-vswitchd"); err == nil || !strings.Contains(err.Error(), "is ovs-vswitchd running") {
		t.Errorf("empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "ovs-vswitchd.pid"), []byte("4242\n"), 0o644)
	if got, err := Find(dir, "ovs-vswitchd"); err != nil || got != filepath.Join(dir, "ovs-vswitchd.4242.ctl") {
		t.Errorf("pid file: %q, %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, "ovs-vswitchd.ctl"), nil, 0o644)
	if got, err := Find(dir, "ovs-vswitchd"); err != nil || got != filepath.Join(dir, "ovs-vswitchd.ctl") {
		t.Errorf("named socket: %q, %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, "ovsdb-server.pid"), []byte("x"), 0o644)
	if _, err := Find(dir, "ovsdb-server"); err == nil || !strings.Contains(err.Error(), "not a pid") {
		t.Errorf("bad pid file: %v", err)
	}
}
