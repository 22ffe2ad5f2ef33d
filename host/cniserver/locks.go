package cniserver

import (
	"context"
	"sync"
)

// keyedLocks serializes work per container ID. Waiting is bounded by the
// caller's context.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

func newKeyedLocks() *keyedLocks { return &keyedLocks{locks: map[string]*keyedLock{}} }

// lock waits for key's lock or ctx's end. On success the caller must call
// the returned unlock.
func (k *keyedLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	l, ok := k.locks[key]
	if !ok {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
