// Package cnierr defines the CNI error codes Switchyard uses beyond the
// spec's well-known ones, and a way to carry a code through layers that
// only keep an error's text (the plugin SDK's wire keeps the message, not
// the Go type). A plugin returns an *Error; the host's CNI server recovers
// the code with From, and the thin binary hands it to the runtime.
package cnierr
