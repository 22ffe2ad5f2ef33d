// Package wirepb is the generated protobuf and gRPC code of the host↔plugin
// wire (plugin.proto). It is internal so plugin authors never see it; edit
// plugin.proto and run `make proto` (`make verify` checks it is current).
package wirepb
