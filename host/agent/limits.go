package agent

import (
	"sync"
	"time"
)

// bucket is a token bucket: rate tokens per second, up to burst.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, burst int) *bucket {
	b := float64(burst)
	if b < 1 {
		b = max(1, rate)
	}
	return &bucket{rate: rate, burst: b, tokens: b, last: time.Now()}
}

// allow takes a token if one is there.
func (b *bucket) allow() bool {
	if b == nil || b.rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
