package sdk

// CNIError is the error result of a CNI call, for a plugin that handles
// CNI: the code the container runtime sees (the CNI spec's codes below 100,
// a plugin's own from 100 up), a one-line message and what to do about it.
// Return it (wrapped or not) from CNIAdd, CNIDel or CNICheck; the SDK
// carries the three fields to the host as a structured detail, so the
// runtime gets exactly this code, message and details.
type CNIError struct {
	Code    uint
	Msg     string
	Details string
}

// Error is the message, then the details.
func (e *CNIError) Error() string {
	if e.Details == "" {
		return e.Msg
	}
	return e.Msg + " (" + e.Details + ")"
}
