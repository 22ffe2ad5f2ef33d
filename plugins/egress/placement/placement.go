// Package placement decides which node holds an Egress IP: a consistent
// hash ring over the live nodes a pool allows. Every agent computes it
// from the same inputs (the member list and Node labels), so they agree
// without talking; a node joining or leaving moves only the IPs whose
// ring segment it takes or gives up (about 1/N of them), not all.
//
// Each node owns Replicas points on the ring (hashes of "name#i"), which
// evens out the share per node; Holder is a binary search, so a decision
// costs O(log(N·Replicas)) whatever the number of IPs.
package placement

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"strconv"
)

// Replicas is the number of ring points per node.
const Replicas = 64

// Ring is an immutable consistent hash ring of node names.
type Ring struct {
	points []uint64
	owner  []string // owner[i] holds points[i]
}

// NewRing builds the ring of nodes (order does not matter).
func NewRing(nodes []string) *Ring {
	type pt struct {
		h uint64
		n string
	}
	pts := make([]pt, 0, len(nodes)*Replicas)
	for _, n := range nodes {
		for i := range Replicas {
			pts = append(pts, pt{hash(n + "#" + strconv.Itoa(i)), n})
		}
	}
	slices.SortFunc(pts, func(a, b pt) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		// Equal hashes (practically never): order by name, so every agent agrees.
		if a.n < b.n {
			return -1
		} else if a.n > b.n {
			return 1
		}
		return 0
	})
	r := &Ring{points: make([]uint64, len(pts)), owner: make([]string, len(pts))}
	for i, p := range pts {
		r.points[i], r.owner[i] = p.h, p.n
	}
	return r
}

// Len is the number of nodes' points on the ring.
func (r *Ring) Len() int { return len(r.points) }

// Holder is the node that holds ip ("" on an empty ring): the owner of the
// first point at or after the IP's hash, wrapping around.
func (r *Ring) Holder(ip netip.Addr) string {
	if len(r.points) == 0 {
		return ""
	}
	b := ip.As16()
	h := mix(binary.BigEndian.Uint64(b[:8]) ^ mix(binary.BigEndian.Uint64(b[8:])))
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.owner[i]
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return mix(h.Sum64())
}

// mix is splitmix64's finaliser: FNV of short, similar strings clusters,
// and this spreads the points evenly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
