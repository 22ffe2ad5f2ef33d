// Package warm keeps a few veth pairs attached to the switch before any
// pod asks for one, so a CNI ADD takes a port that is already there
// instead of waiting for ovs-vswitchd to attach a new one.
//
// On OVS's userspace datapath, attaching a port costs ovs-vswitchd work
// in proportion to every port already on the bridge (it re-reads each
// one's state from the kernel), and that work sat on the ADD's critical
// path. A warm pair has both ends in the host netns: its host end is
// attached while no pod waits, and an ADD creates the pod's interface as
// a macvlan on the other end, directly in the pod's netns (veth.Adopt).
// Refilling the pool costs the switch the same as a port always did, but
// off the ADD path.
//
// Every pair the pool creates is first written down in its directory. A
// podnet that restarts (or died) takes the ready pairs over when it opens
// the pool again, so a restart changes nothing on the switch, and removes
// those it cannot use. An unloaded podnet, or one whose pool was turned
// off, removes them; uninstall removes any left (sdk.ExternalIDNodeVeth).
// Claims record which pair each pod took.
package warm
