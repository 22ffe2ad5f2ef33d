package controlplane

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// A port taken between freePort and the apiserver's bind (another test
// process, an ephemeral port) costs a retry on fresh ports, not the run.
func TestStartRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var mu sync.Mutex
	calls := 0
	freePort = func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 3 { // the first attempt's apiserver port
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return freeLoopbackPort()
	}
	defer func() { freePort = freeLoopbackPort }()
	var logs []string
	cp := StartWithOptions(logRecorder{t, &logs}, Options{})
	if calls != 6 {
		t.Errorf("freePort called %d times, want 6 (two attempts of three ports)", calls)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "address already in use") {
		t.Errorf("the retry was not logged: %q", logs)
	}
	if _, err := cp.Client.Discovery().ServerVersion(); err != nil {
		t.Errorf("the control plane of the second attempt does not answer: %v", err)
	}
}

// logRecorder keeps what the control plane logs.
type logRecorder struct {
	*testing.T
	logs *[]string
}

func (r logRecorder) Logf(format string, args ...any) {
	r.T.Logf(format, args...)
	*r.logs = append(*r.logs, fmt.Sprintf(format, args...))
}
