package cniwire

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadRequest(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Request
		wantErr string
	}{
		{"add", `{"op":"ADD","containerID":"c1","ifName":"eth0","pod":{"namespace":"ns","name":"p"},"netConf":"e30="}`,
			&Request{Op: OpAdd, ContainerID: "c1", IfName: "eth0", Pod: PodRef{Namespace: "ns", Name: "p"}, NetConf: []byte("{}")}, ""},
		{"gc", `{"op":"GC","validAttachments":[{"containerID":"c1","ifName":"eth0"}]}`,
			&Request{Op: OpGC, ValidAttachments: []Attachment{{ContainerID: "c1", IfName: "eth0"}}}, ""},
		{"a newer binary's field is ignored", `{"op":"DEL","containerID":"c1","future":true}`, &Request{Op: OpDel, ContainerID: "c1"}, ""},
		{"unknown op", `{"op":"VERSION"}`, nil, `unknown CNI operation "VERSION"`},
		{"no op", `{"containerID":"c1"}`, nil, `unknown CNI operation ""`},
		{"not JSON", `{"op":`, nil, "reading a CNI request"},
		{"too large", `{"op":"ADD","rawArgs":"` + strings.Repeat("x", MaxMessage) + `"}`, nil, "reading a CNI request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadRequest(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadRequest = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadRequest: whatever reaches the socket, the decoder returns a
// request with a known op or an error, and never panics.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"op":"ADD","containerID":"c1","ifName":"eth0","pod":{"namespace":"ns","name":"p"},"netConf":"e30="}`))
	f.Add([]byte(`{"op":"GC","validAttachments":[{"containerID":"c1","ifName":"eth0"}]}`))
	f.Add([]byte(`{"op":"STATUS"}{"op":"ADD"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := ReadRequest(bytes.NewReader(data))
		if err != nil {
			return
		}
		switch req.Op {
		case OpAdd, OpDel, OpCheck, OpStatus, OpGC:
		default:
			t.Fatalf("accepted op %q", req.Op)
		}
	})
}

// serveOnce answers each connection on a fresh socket with answer.
func serveOnce(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
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
			go func() { defer c.Close(); answer(c) }()
		}
	}()
	return sock
}

func TestCall(t *testing.T) {
	var seen *Request
	echo := serveOnce(t, func(c net.Conn) {
		req, err := ReadRequest(c)
		if err != nil {
			WriteResponse(c, &Response{Error: &Error{Code: 6, Msg: err.Error()}})
			return
		}
		seen = req
		WriteResponse(c, &Response{Result: &Result{IPs: []IPConfig{{Address: "10.0.0.5/24"}}}})
	})
	silent := serveOnce(t, func(c net.Conn) { ReadRequest(c) })
	stuck := serveOnce(t, func(c net.Conn) { ReadRequest(c); time.Sleep(5 * time.Second) })

	resp, err := Call(context.Background(), echo, &Request{Op: OpAdd, ContainerID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if seen.ContainerID != "c1" || resp.Result == nil || resp.Result.IPs[0].Address != "10.0.0.5/24" {
		t.Errorf("round trip: agent saw %+v, caller got %+v", seen, resp)
	}
	if _, err := Call(context.Background(), silent, &Request{Op: OpDel}); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("agent hung up without answering: got %v, want ErrNoAnswer", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Call(ctx, stuck, &Request{Op: OpAdd}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("agent stuck past the deadline: got %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the call outlived its 200ms deadline by %v", took)
	}
}
