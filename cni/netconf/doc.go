// Package netconf parses and validates the network configuration kubelet
// hands the switchyard-cni binary on stdin. Start at Parse. It is the only
// decoder of untrusted bytes in the thin binary, so it is fuzzed.
package netconf
