package reconcile

import (
	"context"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

// TestBacklogCountsQueuedAndInFlight drives a real workqueue through the
// cases that fool a Len-plus-in-flight count: a key taken but not Done, a
// duplicate Add, and a key re-added while a worker holds it.
func TestBacklogCountsQueuedAndInFlight(t *testing.T) {
	type step struct {
		name string
		do   func(q workqueue.TypedRateLimitingInterface[string])
		want int64
	}
	get := func(want string) func(q workqueue.TypedRateLimitingInterface[string]) {
		return func(q workqueue.TypedRateLimitingInterface[string]) {
			if k, _ := q.Get(); k != want {
				t.Fatalf("Get returned %q, want %q", k, want)
			}
		}
	}
	add := func(k string) func(q workqueue.TypedRateLimitingInterface[string]) {
		return func(q workqueue.TypedRateLimitingInterface[string]) { q.Add(k) }
	}
	done := func(k string) func(q workqueue.TypedRateLimitingInterface[string]) {
		return func(q workqueue.TypedRateLimitingInterface[string]) { q.Done(k) }
	}
	steps := []step{
		{"add a", add("a"), 1},
		{"add a again is deduplicated", add("a"), 1},
		{"add b", add("b"), 2},
		{"take a: queue length drops, backlog does not", get("a"), 2},
		{"re-add a while held", add("a"), 3},
		{"a done: requeued", done("a"), 2},
		{"take b", get("b"), 2},
		{"b done", done("b"), 1},
		{"take a again", get("a"), 1},
		{"a done: empty", done("a"), 0},
	}
	b := newBacklog()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: b})
	defer q.ShutDown()
	for _, s := range steps {
		s.do(q)
		if got := b.n.Load(); got != s.want {
			t.Fatalf("after %q: backlog %d, want %d", s.name, got, s.want)
		}
	}
	if !b.waitEmpty(context.Background()) {
		t.Fatal("waitEmpty returned false on an empty backlog")
	}
}

// TestBacklogWaitEmptyWakes checks that a waiter blocked on a non-empty
// backlog wakes when the last key is Done, and that a cancelled wait
// reports it.
func TestBacklogWaitEmptyWakes(t *testing.T) {
	b := newBacklog()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: b})
	defer q.ShutDown()
	q.Add("a")
	woke := make(chan bool)
	go func() { woke <- b.waitEmpty(context.Background()) }()
	k, _ := q.Get()
	q.Done(k)
	if !<-woke {
		t.Fatal("waitEmpty returned false")
	}

	q.Add("b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.waitEmpty(ctx) {
		t.Fatal("waitEmpty on a non-empty backlog with a cancelled context returned true")
	}
}
