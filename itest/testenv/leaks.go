package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessesOfRun lists "pid cmdline" of live processes whose command line
// mentions this run's directories, i.e. daemons the harness started.
func ProcessesOfRun(runID string) []string {
	marker := filepath.Join(BaseDir, Prefix+runID)
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, marker) {
			out = append(out, e.Name()+" "+cmd)
		}
	}
	return out
}
