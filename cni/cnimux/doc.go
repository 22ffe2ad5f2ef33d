// Package cnimux serves the agent's CNI socket to two kinds of caller:
// gRPC clients (tools, tests, the agent's own probes) and the thin CNI
// binary, which speaks cni/cniwire's JSON to start fast. The first byte of
// a connection tells them apart, and both reach the same cnipb.CNIServer.
package cnimux
