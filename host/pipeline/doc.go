// Package pipeline is the host's arbitration of br-int's OpenFlow pipeline:
// which plugin owns which table, which table IDs and register bits each gets,
// and whether a submitted flow is allowed. It is pure logic — no I/O — so
// every rule is covered by table-driven tests.
//
// Where to start: stages.go declares every stage, its pipeline and its range
// of table IDs (with the diagram and the "how to add a stage" note);
// Arbiter.Register (arbiter.go) assigns a plugin's tables, fields and cookie
// prefix; Arbiter.Resolve (resolve.go) checks one flow and resolves its
// symbolic table names, jumps and register fields.
package pipeline
