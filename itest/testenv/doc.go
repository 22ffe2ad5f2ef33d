// Package testenv holds what every harness package shares: the T interface
// (satisfied by *testing.T and by the demo's runner), run-unique names and
// directories, precondition checks with actionable messages, and supervised
// child processes that cannot outlive the test.
package testenv
