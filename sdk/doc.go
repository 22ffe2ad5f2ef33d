// Package sdk is the public Switchyard plugin SDK.
//
// A feature plugin implements Feature (plus any optional capability
// interfaces) and calls Serve from its main. Everything about the wire — the
// go-plugin handshake, gRPC and protobuf — stays inside this module, under
// internal/, where plugin authors cannot reach it.
package sdk
