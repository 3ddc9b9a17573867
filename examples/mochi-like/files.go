package main

import (
	"io/fs"
	"strings"
)

// hiddenFS is the folder that mochi-like serves: fsys without its dotfiles.
// A name with any element that starts with "." (".git/config", ".env",
// "a/.secret/b") does not exist, and directory listings leave such entries
// out, so a server started in a repository never serves its .git folder.
type hiddenFS struct{ fsys fs.FS }

// Open opens name in the folder, unless name is hidden.
func (h hiddenFS) Open(name string) (fs.File, error) {
	if hidden(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := h.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if d, ok := f.(fs.ReadDirFile); ok {
		return listing{d}, nil
	}
	return f, nil
}

// hidden reports whether a valid fs.FS name has an element that starts
// with a dot. The folder itself, ".", is not hidden.
func hidden(name string) bool {
	if name == "." {
		return false
	}
	for elem := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(elem, ".") {
			return true
		}
	}
	return false
}

// listing is a directory whose listing leaves hidden entries out.
type listing struct{ fs.ReadDirFile }

// ReadDir returns the directory's entries whose names do not start with a
// dot, keeping fs.ReadDirFile's contract: with n > 0 it returns at least
// one entry or an error.
func (l listing) ReadDir(n int) ([]fs.DirEntry, error) {
	for {
		entries, err := l.ReadDirFile.ReadDir(n)
		kept := entries[:0]
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				kept = append(kept, e)
			}
		}
		// With n > 0, a batch of only hidden entries is no answer: read on.
		if n <= 0 || len(kept) > 0 || err != nil || len(entries) == 0 {
			return kept, err
		}
	}
}
