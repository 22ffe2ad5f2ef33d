// Package hostnet is what the egress plugin does in the node's kernel:
// the Egress IPs this node holds sit on a dummy device (Device) and are
// announced with gratuitous ARP on the uplink (Announce); selected pods'
// traffic to outside the cluster is SNATed to its Egress IP with nftables
// (ApplySNAT), in table switchyard-egress, in a srcnat chain that runs
// before tunnel's masquerade (priority srcnat-10), so that chain never
// sees a connection this one translated.
//
// The held IPs of pools with subnetInfo are also policy-routed through
// their subnet's gateway (route.go: ApplyRoutes, ApplyRouteMarks).
package hostnet
