package sdk

// APIVersion is the plugin API version this SDK speaks. It is negotiated in
// the go-plugin handshake: a host refuses a plugin whose version it does not
// support, naming both. Bump it only for wire changes a peer cannot ignore;
// adding fields to requests and responses does not need a bump.
const APIVersion = 1
