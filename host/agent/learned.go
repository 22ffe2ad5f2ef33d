package agent

import "switchyard.dev/switchyard/host/pipeline"

// Learned flows: a learn action makes the switch add flows the host never
// sent and its flow store does not hold (ClientIP affinity pins a client to
// a backend that way). They carry their plugin's prefix, the learning
// flow's tag and the reserved round pipeline.LearnedRound
// (pipeline.LearnedCookie), and they belong to the plugin as long as it is
// loaded: they go when they time out, or with the plugin (removePlugin
// deletes by prefix).
//
// The rule every sweep of the switch must keep (the stale-round sweep of
// Synced, and any sweep of flows that no live plugin owns): a flow for
// which sparedBySweep is true is not deleted while a plugin with its
// prefix is loaded. A sweep by cookie under pipeline.CookieOwnerMask for a
// round the arbiter assigned never matches one; a sweep that selects
// flows another way (dump and compare, by table) must test each cookie
// with sparedBySweep.
func sparedBySweep(cookie uint64) bool {
	_, round, _ := pipeline.SplitCookie(cookie)
	return round == pipeline.LearnedRound
}
