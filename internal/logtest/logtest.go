// Package logtest records what a library logs through log/slog, for tests
// that assert a state change is logged once and nothing else is.
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// Recorder is a slog.Handler that keeps each record's level and message, as
// "LEVEL message". It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	recs []string
}

// Enabled implements slog.Handler: every level is recorded.
func (h *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h *Recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler; attributes are not recorded.
func (h *Recorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler; groups are not recorded.
func (h *Recorder) WithGroup(string) slog.Handler { return h }

// Records returns a copy of what was logged so far, in order.
func (h *Recorder) Records() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.recs...)
}
