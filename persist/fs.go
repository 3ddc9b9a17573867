package persist

import (
	"os"
	"time"
)

// FS is the file system a [Journal] writes to: the operating system's by
// default ([OS]); tests give one whose writes fail. Names are paths.
type FS interface {
	// ReadFile returns the whole file; an error that satisfies
	// errors.Is(err, fs.ErrNotExist) when there is none.
	ReadFile(name string) ([]byte, error)
	// Create creates or truncates name for writing. The operating
	// system's creates it readable and writable by its owner only (0600):
	// the state holds the limiter's ids, which may identify clients.
	Create(name string) (File, error)
	// Rename renames oldName to newName, replacing it.
	Rename(oldName, newName string) error
	// Remove removes name.
	Remove(name string) error
	// SyncDir makes the directory's entries (a rename, a new file) durable.
	SyncDir(dir string) error
	// MkdirAll creates the directory dir, and its parents, if missing;
	// the operating system's makes them open to their owner only (0700).
	MkdirAll(dir string) error
	// ReadDirNames returns the names of the entries of the directory dir.
	ReadDirNames(dir string) ([]string, error)
}

// File is a file open for writing.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}
func (osFS) Rename(oldName, newName string) error { return os.Rename(oldName, newName) }
func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o700) }

func (osFS) ReadDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Ticker delivers ticks on C() until Stop, as a time.Ticker does; the
// limiter's TickerClock makes them, so tests move the writer by hand.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

func newWallTicker(d time.Duration) Ticker { return wallTicker{time.NewTicker(d)} }
