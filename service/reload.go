package service

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// DefaultWatchEvery is how often Reloader.Watch looks at the configuration
// path: a change is in force within this time plus a load.
const DefaultWatchEvery = 250 * time.Millisecond

// settle is how long a change must stay the same before Watch loads it.
const settle = 50 * time.Millisecond

// Reloader loads the configuration at a path into a Server, again when
// asked (SIGHUP) or when the files change (Watch). A configuration that
// fails to load leaves the one in force; the error is logged with its file
// and line and counted in Metrics.
type Reloader struct {
	path    string
	srv     *Server
	metrics *Metrics
	log     *slog.Logger
	opts    LoadOptions

	mu   sync.Mutex
	last [32]byte
	also []func(path string) (apply func(), err error) // AlsoLoad's
}

// NewReloader returns a Reloader of path into srv; metrics and log may be
// nil.
func NewReloader(path string, srv *Server, metrics *Metrics, log *slog.Logger) *Reloader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reloader{path: path, srv: srv, metrics: metrics, log: log}
}

// SetLoadOptions sets how the configuration is loaded; call it before the
// first Reload.
func (r *Reloader) SetLoadOptions(o LoadOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts = o
}

// Reload loads the configuration now and puts it in force, or returns why
// not (the one in force stays).
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = signature(r.path)
	c, err := LoadWith(r.path, r.opts)
	if err == nil {
		err = r.srv.CheckConfig(c)
	}
	var applies []func()
	for _, load := range r.also {
		if err != nil {
			break
		}
		var apply func()
		apply, err = load(r.path)
		applies = append(applies, apply)
	}
	r.metrics.ConfigLoaded(c, err)
	if err != nil {
		attrs := []any{"err", err}
		var ce *ConfigError
		if errors.As(err, &ce) {
			attrs = append(attrs, "file", ce.File, "line", ce.Line, "column", ce.Column)
		}
		r.log.Error("configuration not loaded; the one in force, if any, stays", attrs...)
		return err
	}
	r.srv.SetConfig(c)
	for _, apply := range applies {
		apply()
	}
	r.log.Info("configuration loaded", "path", r.path, "domains", len(c.domains), "rules", c.Rules())
	return nil
}

// AlsoLoad makes every later Reload load a second configuration from the
// same path, beside the rate limit rules (the quota service's sections):
// load reads and checks it and returns apply, which puts it in force. A
// Reload puts both in force, or, if either fails, neither, and logs and
// counts the failure the same way.
func (r *Reloader) AlsoLoad(load func(path string) (apply func(), err error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.also = append(r.also, load)
}

// Watch looks at the path every interval (0: DefaultWatchEvery) until ctx
// ends, and reloads when what it finds changed and then stayed the same for
// 50 ms (so that a file being written is not loaded half written): a file
// written in place,
// replaced by a rename, or a Kubernetes ConfigMap's ..data symlink swapped
// (each file is looked at through its symlinks).
func (r *Reloader) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultWatchEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		sig := signature(r.path)
		changed := sig != r.last
		r.mu.Unlock()
		if !changed {
			continue
		}
		// A file being written in place may be seen half written: load it
		// only once it has stayed the same for settle.
		select {
		case <-ctx.Done():
			return
		case <-time.After(settle):
		}
		if signature(r.path) == sig {
			_ = r.Reload()
		}
	}
}

// signature sums what identifies the files at path now: each one's name,
// size, modification time, device and inode, through symlinks.
func signature(path string) [32]byte {
	h := sha256.New()
	add := func(name string) {
		var b [8]byte
		h.Write([]byte(name))
		st, err := os.Stat(name)
		if err != nil {
			h.Write([]byte{0})
			return
		}
		for _, v := range []int64{st.Size(), st.ModTime().UnixNano(), int64(st.Mode())} {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			binary.LittleEndian.PutUint64(b[:], uint64(sys.Ino))
			h.Write(b[:])
			binary.LittleEndian.PutUint64(b[:], uint64(sys.Dev))
			h.Write(b[:])
		}
	}
	add(path)
	if entries, err := os.ReadDir(path); err == nil {
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, filepath.Join(path, e.Name()))
		}
		sort.Strings(names)
		for _, n := range names {
			add(n)
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
