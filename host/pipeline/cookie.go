package pipeline

// Cookie layout: every flow a plugin installs carries
//
//	bits 63-48  plugin prefix (1..255), stable for the plugin's lifetime on the node
//	bits 47-32  round: the plugin incarnation that installed the flow
//	bits 31-0   the plugin's own tag (flow.Flow.Tag)
//
// so `ovs-ofctl dump-flows cookie=0x<prefix>000000000000/0xffff000000000000`
// shows one plugin's flows, and stale rounds can be swept by cookie mask.
//
// Flows the switch adds from a learn action carry the plugin's prefix, the
// learning flow's tag and the reserved round LearnedRound, which no
// incarnation ever gets: a sweep of stale rounds by cookie so never
// deletes learned state (ClientIP affinity), while deleting the plugin by
// prefix still does.
const (
	CookiePrefixMask uint64 = 0xffff_0000_0000_0000
	CookieOwnerMask  uint64 = 0xffff_ffff_0000_0000
)

// Cookie builds a flow cookie.
func Cookie(prefix, round uint16, tag uint32) uint64 {
	return uint64(prefix)<<48 | uint64(round)<<32 | uint64(tag)
}

// LearnedRound is the round of every learned flow's cookie; the arbiter
// never assigns it to an incarnation.
const LearnedRound uint16 = 0xffff

// LearnedCookie is the cookie the flows learned by a flow with cookie c
// (or, with tag 0, by a group bucket of the plugin) carry.
func LearnedCookie(c uint64) uint64 {
	prefix, _, tag := SplitCookie(c)
	return Cookie(prefix, LearnedRound, tag)
}

// SplitCookie is the inverse of Cookie.
func SplitCookie(c uint64) (prefix, round uint16, tag uint32) {
	return uint16(c >> 48), uint16(c >> 32), uint32(c)
}

// GroupID maps a plugin-local group ID into the plugin's share of the group
// ID space (prefix in the top 8 bits).
func GroupID(prefix uint16, local uint32) uint32 { return uint32(prefix)<<24 | local&0xffffff }

// MeterID maps a plugin-local meter ID (1..1023) into the plugin's share.
// Meter IDs stay below 2^18, the userspace datapath's limit.
func MeterID(prefix uint16, local uint32) uint32 { return uint32(prefix)<<10 | local&0x3ff }

// GroupPrefix is the cookie prefix whose share holds a global group ID.
func GroupPrefix(global uint32) uint16 { return uint16(global >> 24) }

// MeterPrefix is the cookie prefix whose share holds a global meter ID.
func MeterPrefix(global uint32) uint16 { return uint16(global >> 10) }
