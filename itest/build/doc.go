// Package build compiles this repository's commands (agent, plugins, CNI
// binaries, controller) for the harness, so tests and the demo run exactly
// the binaries a node would.
package build
