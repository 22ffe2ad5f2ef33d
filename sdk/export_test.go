package sdk

import "io"

// ServeVersion serves f claiming an arbitrary API version, so tests can
// check how a host treats a plugin built for another version.
func ServeVersion(f Feature, version int, stderr io.Writer) { serve(f, version, stderr) }
