package ifstore

import (
	"context"
	"sync"
)

// subscriber has its own unbounded queue and goroutine, so one slow plugin
// never delays the CNI path or another subscriber, and every subscriber
// sees every event in order.
type subscriber struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []Event
	closed bool
	done   chan struct{}
}

// Subscribe calls fn for every change, first replaying the current records
// as Added events, then each live change in order. fn runs on a goroutine
// of its own. The returned stop function ends the subscription and waits
// until fn is no longer running.
func (s *Store) Subscribe(fn func(context.Context, Event)) (stop func()) {
	sub := &subscriber{done: make(chan struct{})}
	sub.cond = sync.NewCond(&sub.mu)
	ctx, cancel := context.WithCancel(context.Background())

	s.mu.Lock()
	for _, i := range sortedValues(s.items) {
		sub.queue = append(sub.queue, Event{Kind: Added, Interface: i})
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()

	go func() {
		defer close(sub.done)
		for {
			sub.mu.Lock()
			for len(sub.queue) == 0 && !sub.closed {
				sub.cond.Wait()
			}
			if sub.closed {
				sub.mu.Unlock()
				return
			}
			ev := sub.queue[0]
			sub.queue = sub.queue[1:]
			sub.mu.Unlock()
			fn(ctx, ev)
		}
	}()
	return func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
		cancel()
		sub.mu.Lock()
		sub.closed = true
		sub.cond.Broadcast()
		sub.mu.Unlock()
		<-sub.done
	}
}

// publish queues ev for every subscriber; callers hold s.mu, which is what
// keeps the order identical for all of them.
func (s *Store) publish(ev Event) {
	for sub := range s.subs {
		sub.mu.Lock()
		sub.queue = append(sub.queue, ev)
		sub.cond.Broadcast()
		sub.mu.Unlock()
	}
}
