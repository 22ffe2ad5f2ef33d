// Package conflist installs switchyard on a node's CNI runtime: it copies
// the switchyard-cni binary into the CNI bin directory and then writes the
// network configuration list kubelet's runtime reads. Both writes are
// atomic (temp file, fsync, rename), and the conflist is refused until the
// binary it names is in place, because a runtime that sees a conflist
// starts using it at once. Start at Install.
package conflist
