package sdkhost

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hcLogger is the hclog.Logger go-plugin wants, writing into slog. go-plugin
// parses a plugin's stderr JSON lines and calls it, so plugin logs become
// host slog records with the plugin's name.
type hcLogger struct {
	l     *slog.Logger
	name  string
	level hclog.Level
	args  []any
}

var _ hclog.Logger = (*hcLogger)(nil)

func newHCLogger(l *slog.Logger) *hcLogger { return &hcLogger{l: l, level: hclog.Debug} }

func toSlog(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if level < h.level {
		return
	}
	// go-plugin appends the plugin's own timestamp; slog stamps the record.
	kept := make([]any, 0, len(args)+len(h.args))
	kept = append(kept, h.args...)
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && (k == "timestamp" || k == "@module") {
			continue
		}
		kept = append(kept, args[i], args[i+1])
	}
	h.l.Log(context.Background(), toSlog(level), msg, kept...)
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *hcLogger) IsTrace() bool                 { return h.level <= hclog.Trace }
func (h *hcLogger) IsDebug() bool                 { return h.level <= hclog.Debug }
func (h *hcLogger) IsInfo() bool                  { return h.level <= hclog.Info }
func (h *hcLogger) IsWarn() bool                  { return h.level <= hclog.Warn }
func (h *hcLogger) IsError() bool                 { return h.level <= hclog.Error }
func (h *hcLogger) ImpliedArgs() []any            { return h.args }
func (h *hcLogger) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}
func (h *hcLogger) Name() string { return h.name }
func (h *hcLogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "."
	}
	c.name += name
	return &c
}
func (h *hcLogger) ResetNamed(name string) hclog.Logger { c := *h; c.name = name; return &c }
func (h *hcLogger) SetLevel(l hclog.Level)              { h.level = l }
func (h *hcLogger) GetLevel() hclog.Level               { return h.level }
func (h *hcLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}
func (h *hcLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo).Writer()
}
