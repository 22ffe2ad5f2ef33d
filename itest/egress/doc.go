// Package egress tests the egress plugin end to end: three nodes running
// podnet, tunnel and egress under real agents joined to a real apiserver,
// the controller's Egress allocation (controller/egress) in the test
// process, and an "external" host on the underlay whose server answers
// each TCP client with the source address it saw. Pods an Egress selects,
// on every node, must be seen with the Egress IP; the others with their
// node's IP. The suite creates, updates and deletes an Egress, checks the
// status conditions for a duplicate IP and an exhausted pool, and fails
// the holding node over (its agent killed and its underlay link cut),
// logging the time until the external server sees the same source again.
// TestSubnetInfo puts the server behind a router in a second subnet and
// checks that a pool's subnetInfo sends Egress traffic through it.
package egress
