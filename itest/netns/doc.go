// Package netns creates and removes named network namespaces for harness
// nodes and pods, and runs Go code inside them with the OS thread locked.
package netns
