// Package build compiles Switchyard's commands (agent, plugins, CNI
// binaries, controller) and other modules' plugins for the harness, so tests
// and the demo run exactly the binaries a node would. Commands takes paths
// inside this repository; Packages takes Go import paths and works from any
// module that requires switchyard.dev/switchyard (see testenv.ModuleDir).
package build
