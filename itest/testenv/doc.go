// Package testenv holds what every harness package shares: the T interface
// (satisfied by *testing.T and by the demo's runner), run-unique names and
// directories, precondition checks with actionable messages, supervised
// child processes that cannot outlive the test, and where the
// switchyard.dev/switchyard module lives (ModuleDir, SourceDir), also when
// the harness runs from another module.
package testenv
