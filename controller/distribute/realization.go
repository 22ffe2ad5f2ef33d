package distribute

import (
	"sync"
)

// Realization records, per policy UID, the generation each node reports as
// realized. A report is the node's complete list: policies it no longer
// lists are forgotten for that node.
type Realization struct {
	mu      sync.Mutex
	byNode  map[string]map[string]int64 // node -> uid -> generation
	changed func(uids []string)
}

// NewRealization returns an empty store; changed (may be nil) is called with
// the UIDs whose realization changed after each report.
func NewRealization(changed func(uids []string)) *Realization {
	return &Realization{byNode: map[string]map[string]int64{}, changed: changed}
}

// Report replaces node's realized set.
func (r *Realization) Report(node string, realized map[string]int64) {
	r.mu.Lock()
	old := r.byNode[node]
	r.byNode[node] = realized
	var uids []string
	for uid, g := range realized {
		if og, ok := old[uid]; !ok || og != g {
			uids = append(uids, uid)
		}
	}
	for uid := range old {
		if _, ok := realized[uid]; !ok {
			uids = append(uids, uid)
		}
	}
	r.mu.Unlock()
	if r.changed != nil && len(uids) > 0 {
		r.changed(uids)
	}
}

// Count returns how many of nodes realized uid at generation or later.
func (r *Realization) Count(uid string, generation int64, nodes []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, node := range nodes {
		if g, ok := r.byNode[node][uid]; ok && g >= generation {
			n++
		}
	}
	return n
}
