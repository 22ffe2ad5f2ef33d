package probe

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Endpoint is one row/column of a matrix: a namespace to probe from, and the
// address probes to it go to.
type Endpoint struct {
	Name  string // label in the table, e.g. "ns1/a" or "node-1"
	NetNS string
	IP    net.IP
}

// Matrix is the outcome of probing every source against every destination.
type Matrix struct {
	Proto    Protocol
	Port     int
	From, To []string
	// Reachable[from][to] is the result of one probe.
	Reachable map[string]map[string]bool
	// Errors keeps the failure reason of each unreachable pair.
	Errors map[string]map[string]error
}

// MatrixOptions tunes Run.
type MatrixOptions struct {
	Timeout time.Duration // per probe; DefaultTimeout if zero
	Workers int           // concurrent probes; 16 if zero
	// SkipSelf leaves out probes from an endpoint to itself.
	SkipSelf bool
}

// Run probes every pair of from × to concurrently.
func Run(from, to []Endpoint, proto Protocol, port int, opts MatrixOptions) *Matrix {
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	m := &Matrix{Proto: proto, Port: port, Reachable: map[string]map[string]bool{}, Errors: map[string]map[string]error{}}
	for _, f := range from {
		m.From = append(m.From, f.Name)
		m.Reachable[f.Name] = map[string]bool{}
		m.Errors[f.Name] = map[string]error{}
	}
	for _, d := range to {
		m.To = append(m.To, d.Name)
	}
	type job struct{ f, d Endpoint }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				err := Check(j.f.NetNS, proto, j.d.IP, port, opts.Timeout)
				mu.Lock()
				m.Reachable[j.f.Name][j.d.Name] = err == nil
				if err != nil {
					m.Errors[j.f.Name][j.d.Name] = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, f := range from {
		for _, d := range to {
			if opts.SkipSelf && f.Name == d.Name {
				continue
			}
			jobs <- job{f, d}
		}
	}
	close(jobs)
	wg.Wait()
	return m
}

// cell renders one result: "ok" reachable, "X" blocked, "." not probed.
func cell(m map[string]map[string]bool, f, d string) string {
	v, ok := m[f][d]
	switch {
	case !ok:
		return "."
	case v:
		return "ok"
	default:
		return "X"
	}
}

// String renders the matrix as a table, sources down, destinations across.
func (m *Matrix) String() string {
	return render(fmt.Sprintf("%s/%d", m.Proto, m.Port), m.From, m.To, func(f, d string) string {
		return cell(m.Reachable, f, d)
	})
}

func render(title string, from, to []string, cellFn func(f, d string) string) string {
	w := len(title)
	for _, f := range from {
		w = max(w, len(f))
	}
	cw := make([]int, len(to))
	for i, d := range to {
		cw[i] = max(len(d), 5)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", w, title)
	for i, d := range to {
		fmt.Fprintf(&b, " | %-*s", cw[i], d)
	}
	b.WriteString("\n")
	b.WriteString(strings.Repeat("-", w))
	for i := range to {
		b.WriteString("-+-" + strings.Repeat("-", cw[i]))
	}
	b.WriteString("\n")
	for _, f := range from {
		fmt.Fprintf(&b, "%-*s", w, f)
		for i, d := range to {
			fmt.Fprintf(&b, " | %-*s", cw[i], cellFn(f, d))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Expect builds an expected-result table in which every pair has the value
// def, for tests to then override specific pairs.
func Expect(from, to []Endpoint, def bool, skipSelf bool) map[string]map[string]bool {
	e := map[string]map[string]bool{}
	for _, f := range from {
		e[f.Name] = map[string]bool{}
		for _, d := range to {
			if skipSelf && f.Name == d.Name {
				continue
			}
			e[f.Name][d.Name] = def
		}
	}
	return e
}

// Diff compares the matrix with expected. It returns "" when they agree;
// otherwise a table in which agreeing cells read as usual and each
// disagreement shows as "got!want", followed by the failure reasons.
func (m *Matrix) Diff(expected map[string]map[string]bool) string {
	var wrong []string
	table := render(fmt.Sprintf("%s/%d", m.Proto, m.Port), m.From, m.To, func(f, d string) string {
		got, want := cell(m.Reachable, f, d), cell(expected, f, d)
		if got == want {
			return got
		}
		wrong = append(wrong, fmt.Sprintf("%s -> %s: got %s, want %s%s", f, d, got, want, reason(m.Errors[f][d])))
		return got + "!" + want
	})
	if len(wrong) == 0 {
		return ""
	}
	sort.Strings(wrong)
	return table + strings.Join(wrong, "\n")
}

func reason(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
