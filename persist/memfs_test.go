package persist_test

import (
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/actorlimit/actorlimit/persist"
)

// memFS is a file system in memory whose writes can be made to fail.
type memFS struct {
	mu    sync.Mutex
	files map[string][]byte
	fail  atomic.Bool // every Write, Sync and Rename fails
	// failDir makes SyncDir fail: a directory whose entries cannot be
	// made durable
	failDir atomic.Bool
	fails   atomic.Int64
}

var errDisk = errors.New("injected disk failure")

func newMemFS() *memFS { return &memFS{files: map[string][]byte{}} }

func (m *memFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return append([]byte{}, b...), nil
}

func (m *memFS) Create(name string) (persist.File, error) {
	if m.failing() {
		return nil, errDisk
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name] = nil
	return &memFile{fs: m, name: name}, nil
}

func (m *memFS) Rename(oldName, newName string) error {
	if m.failing() {
		return errDisk
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[oldName]
	if !ok {
		return fs.ErrNotExist
	}
	delete(m.files, oldName)
	m.files[newName] = b
	return nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; !ok {
		return fs.ErrNotExist
	}
	delete(m.files, name)
	return nil
}

func (m *memFS) SyncDir(string) error {
	if m.failDir.Load() {
		return errDisk
	}
	return nil
}
func (m *memFS) MkdirAll(string) error { return nil }

func (m *memFS) ReadDirNames(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name := range m.files {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	return names, nil
}

func (m *memFS) failing() bool {
	if m.fail.Load() {
		m.fails.Add(1)
		return true
	}
	return false
}

// set replaces a file's content.
func (m *memFS) set(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name] = b
}

type memFile struct {
	fs   *memFS
	name string
}

// Write appends p, or, failing, half of it: a torn write.
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.fail.Load() {
		f.fs.fails.Add(1)
		f.fs.files[f.name] = append(f.fs.files[f.name], p[:len(p)/2]...)
		return len(p) / 2, errDisk
	}
	f.fs.files[f.name] = append(f.fs.files[f.name], p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if f.fs.failing() {
		return errDisk
	}
	return nil
}

func (f *memFile) Close() error { return nil }
