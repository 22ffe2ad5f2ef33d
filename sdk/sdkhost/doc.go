// Package sdkhost is the host side of the plugin wire, used by
// switchyard-agent (and tests) only; plugin authors never import it.
//
// Launch starts a plugin process and negotiates the API version; the
// returned *Plugin is a typed client of the plugin's Feature service, and
// Start serves the host's HostService back to the plugin over the go-plugin
// broker. Where to start: Launch (plugin.go), HostService (service.go).
package sdkhost
