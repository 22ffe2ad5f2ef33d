package openflow

import "context"

// A pacer is called by Bundle between parts of a large bundle it streams to
// the switch, and once more before it commits; it may block (for as long
// as the caller wants the switch's CPU left to others) and returns to let
// the bundle go on. The agent uses it to let pod requests go first.
type pacer func(ctx context.Context)

type pacerKey struct{}

// pacedPart is how many bundle messages are written between two calls of
// a pacer: about 30 KiB of flow mods, so what the switch still has queued
// when a pause begins is small.
const pacedPart = 256

// WithPacer returns a ctx under which Bundle calls pace between every
// pacedPart messages it writes, and before the commit. A pause never
// splits the bundle: it stays one atomic commit. As with
// net/http/httptrace, the hook rides on the context so that Switch
// implementations without it ignore it.
func WithPacer(ctx context.Context, pace func(ctx context.Context)) context.Context {
	return context.WithValue(ctx, pacerKey{}, pacer(pace))
}

func pacerFrom(ctx context.Context) pacer {
	p, _ := ctx.Value(pacerKey{}).(pacer)
	return p
}
