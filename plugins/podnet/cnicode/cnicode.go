// Package cnicode holds the CNI error codes podnet returns (as
// sdk.CNIError), in the range the CNI spec leaves to plugins. They are
// stable so operators can alert on them, and the same numbers the agent's
// own CNI errors use.
package cnicode

const (
	// IPAMExhausted: the node's pod CIDR has no free address.
	IPAMExhausted uint = 101
	// Interface: creating or configuring the pod interface failed.
	Interface uint = 102
	// AlreadyAttached: ADD for a container/ifname that is attached already.
	AlreadyAttached uint = 103
	// CheckFailed: CHECK found the attachment incomplete.
	CheckFailed uint = 104
	// Switch: the OVS port or flows could not be programmed.
	Switch uint = 105
)
