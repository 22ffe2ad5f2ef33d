// Package procstat reads this process's resource use for the controller
// benchmarks: peak resident memory (VmHWM, which the kernel keeps and which a
// benchmark can restart after its setup) and CPU time of all threads.
// Linux only, like the rest of the benchmarks' environment.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// PeakRSS returns the process's peak resident set size in bytes since start
// or the last ResetPeakRSS.
func PeakRSS() (float64, error) { return status("VmHWM") }

// RSS returns the process's resident set size in bytes now.
func RSS() (float64, error) { return status("VmRSS") }

// status reads a kB field of /proc/self/status in bytes.
func status(field string) (float64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", field, err)
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			kb, err := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s %q: %w", field, v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// ResetPeakRSS restarts the peak at the current RSS, so setup garbage that
// was already returned to the OS does not count.
func ResetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting peak RSS via /proc/self/clear_refs: %w", err)
	}
	return nil
}

// CPUTime returns the user plus system CPU time of all the process's
// threads, GC included: steadier than wall time on a shared machine.
func CPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
