// Package kube is the agent's side of Kubernetes: how it reaches the
// apiserver (in-cluster config in a pod, else a kubeconfig), what it may do
// there (a preflight that names a missing RBAC verb, an unreachable server
// or a missing Node in one line each), and the one Node informer that feeds
// both the agent's own node facts and the node events of every other node.
//
// The informer is the only watch the agent opens, however many plugins
// subscribe to node events: the agent fans its events out. After a watch
// break, client-go relists and the informer reports every object again;
// Watch forwards only what really changed (NodeInfo differs, a node came or
// went), so plugins see a minimal diff and nothing else moves.
//
// Where to start: Connect (config.go), then Watch (nodes.go) and Facts
// (facts.go).
package kube
