// Package hostnet is what the tunnel plugin does in the node's network
// namespace, beside the switch: routes to peer pod CIDRs through the
// gateway device (netlink), a permanent neighbour entry for each IPv6 peer
// gateway, IP forwarding, and the masquerade of pod traffic leaving the
// cluster (nftables over netlink, github.com/google/nftables).
//
// Masquerade: one table per family ("switchyard-tunnel", ip and ip6) with a
// postrouting NAT chain. Traffic from this node's pod CIDR that leaves by
// any device but the gateway is masqueraded to the node's address, unless
// it goes to a pod CIDR or a node IP of the cluster: pod-to-pod and
// pod-to-node traffic keeps the pod's address. The table is rebuilt in one
// netlink transaction on every change (add, delete, add again), so a
// packet sees the old rules or the new ones, never a half.
//
// Where to start: Routes (routes.go), Masquerade (masq.go).
package hostnet
