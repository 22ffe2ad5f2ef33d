package agent

import (
	"runtime/debug"
	"sync"
	"time"
)

// memoryRelease hands the heap a burst left behind back to the kernel.
//
// A plugin's (re)sync decodes and translates every flow it holds, so the Go
// heap briefly holds several times what the flow store keeps. The runtime
// grows its heap goal to twice the live heap and returns freed pages only
// slowly, so an agent that just synced 100,000 flows would keep tens of MiB
// of garbage resident for minutes. After a sync and the foreign sweep that
// follows it (the end of such a burst) the agent forces one collection and
// returns the free pages at once. It costs one full GC, off the sync's
// path, at most once per minInterval.
type memoryRelease struct {
	mu          sync.Mutex
	last        time.Time
	pending     bool
	minInterval time.Duration
	free        func() // debug.FreeOSMemory; replaced in tests
}

func newMemoryRelease() *memoryRelease {
	return &memoryRelease{minInterval: 5 * time.Second, free: debug.FreeOSMemory}
}

// afterBurst schedules a release: now if none ran recently, else when
// minInterval has passed since the last one. Calls while one is pending
// fold into it.
func (m *memoryRelease) afterBurst() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending {
		return
	}
	m.pending = true
	wait := time.Until(m.last.Add(m.minInterval))
	time.AfterFunc(max(wait, 0), func() {
		// Marked done before the release runs: a burst that ends while it
		// runs schedules the next one instead of folding into this one,
		// which has already started and would not see it.
		m.mu.Lock()
		m.last, m.pending = time.Now(), false
		m.mu.Unlock()
		m.free()
	})
}
