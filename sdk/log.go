package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// hostLogHandler writes slog records as the JSON lines go-plugin's host side
// parses from a plugin's stderr (@message, @level, @timestamp plus the
// attributes), so a plugin's logs land in the host's log with its name.
type hostLogHandler struct {
	mu     *sync.Mutex
	w      io.Writer
	level  slog.Level
	attrs  []slog.Attr
	groups []string
}

func newHostLogHandler(w io.Writer, level slog.Level) *hostLogHandler {
	return &hostLogHandler{mu: &sync.Mutex{}, w: w, level: level}
}

func (h *hostLogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

func (h *hostLogHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{
		"@message":   r.Message,
		"@level":     levelName(r.Level),
		"@timestamp": r.Time.Format("2006-01-02T15:04:05.000000Z07:00"),
	}
	add := func(a slog.Attr) { h.put(m, a) }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(h.qualify(a)); return true })
	b, err := json.Marshal(m)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"@message":%q,"@level":"error"}`, "unloggable record: "+err.Error()))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err = h.w.Write(append(b, '\n'))
	return err
}

func (h *hostLogHandler) qualify(a slog.Attr) slog.Attr {
	for i := len(h.groups) - 1; i >= 0; i-- {
		a.Key = h.groups[i] + "." + a.Key
	}
	return a
}

func (h *hostLogHandler) put(m map[string]any, a slog.Attr) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		for _, g := range v.Group() {
			g.Key = a.Key + "." + g.Key
			h.put(m, g)
		}
	case slog.KindTime:
		m[a.Key] = v.Time().Format(time.RFC3339Nano)
	case slog.KindDuration:
		m[a.Key] = v.Duration().String()
	case slog.KindAny:
		if e, ok := v.Any().(error); ok {
			m[a.Key] = e.Error()
		} else if s, ok := v.Any().(fmt.Stringer); ok {
			m[a.Key] = s.String()
		} else {
			m[a.Key] = v.Any()
		}
	default:
		m[a.Key] = v.Any()
	}
}

func (h *hostLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		c.attrs = append(c.attrs, h.qualify(a))
	}
	return &c
}

func (h *hostLogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = append(append([]string(nil), h.groups...), name)
	return &c
}
