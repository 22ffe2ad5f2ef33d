// Package underlay puts the node's IP on an OVS bridge, as the userspace
// datapath needs for tunnels.
//
// On the netdev datapath ovs-vswitchd encapsulates a tunnel packet only
// from an address held by the internal port of one of its bridges, and
// takes the encapsulated packets it receives only through such a bridge
// (it routes them with its own table and resolves the peer's MAC from the
// ARP it sees there). So the uplink (eth0) becomes
// a port of a plain learning bridge (br-phy), and the node's addresses and
// routes move from the uplink to br-phy's internal interface, which takes
// the uplink's MAC and MTU. Node-to-node traffic, the apiserver and
// everything else on the node keep working through br-phy.
//
// ovs-vswitchd runs with --disable-system-route, and Mirror gives it the
// kernel's routes through the bridge instead (mirror.go says why), and has
// the kernel resolve the peers' MACs again for a restarted ovs-vswitchd.
//
// Where to start: Setup. It is idempotent, so an agent restart finds
// everything in place and changes nothing. It uses OVSDB (host/ovsdb),
// netlink, and ovs-vswitchd's control socket (host/unixctl) for the
// routes.
package underlay
