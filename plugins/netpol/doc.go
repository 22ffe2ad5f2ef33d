// Command netpol is the Switchyard NetworkPolicy plugin: it enforces the
// policies switchyard-controller streams to its node. It is started by
// switchyard-agent; see package feature (the plugin) and package flows
// (the flows it installs, and why they look the way they do).
package main
