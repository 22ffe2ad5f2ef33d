package testenv

import "fmt"

// recordingT is a T that records the first Fatalf and stops the calling
// goroutine, as testing.T does, so precondition messages can be asserted.
type recordingT struct {
	fatal    string
	cleanups []func()
}

type fatalStop struct{}

func (r *recordingT) Helper()                   {}
func (r *recordingT) Logf(string, ...any)       {}
func (r *recordingT) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recordingT) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...); panic(fatalStop{}) }

// CaptureFatal runs fn with a T whose Fatalf records its message and stops
// fn, runs the cleanups fn registered, and returns the message ("" if fn
// never called Fatalf). Tests use it to assert the harness's own error
// messages for bad input.
func CaptureFatal(fn func(T)) (msg string) {
	r := &recordingT{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatalStop); !ok {
				panic(v)
			}
		}
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
		msg = r.fatal
	}()
	fn(r)
	return ""
}
