package bench

import (
	"sync"
	"time"

	"github.com/google/btree"
)

// window is one fixed-window counter.
type window struct {
	id     string
	scale  int64
	bucket int64
	count  int64
}

// mutexMap is the simplest fixed-window limiter: a map behind a mutex.
type mutexMap struct {
	mu  sync.Mutex
	now func() int64
	m   map[mapKey]*window
}

type mapKey struct {
	id    string
	scale int64
}

func newMutexMap(now func() int64) *mutexMap {
	return &mutexMap{now: now, m: make(map[mapKey]*window)}
}

// CheckRate counts one hit and reports whether it is within limit.
func (l *mutexMap) CheckRate(id string, scaleMs, limit int64) bool {
	bucket := l.now() / (scaleMs * int64(time.Millisecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	k := mapKey{id, scaleMs}
	w, ok := l.m[k]
	if !ok {
		w = &window{id: id, scale: scaleMs, bucket: bucket}
		l.m[k] = w
	}
	if w.bucket != bucket {
		w.bucket, w.count = bucket, 0
	}
	w.count++
	return w.count <= limit
}

// mutexBTree keeps the raterlimiter's ordered table, <scale, bucket, id>
// -> count, in a google/btree behind a mutex: the design of actorlimit's
// table without the actor.
type mutexBTree struct {
	mu   sync.Mutex
	now  func() int64
	tree *btree.BTreeG[*window]
	// probe is the search key, reused to avoid an allocation per call.
	probe window
}

func newMutexBTree(now func() int64) *mutexBTree {
	less := func(a, b *window) bool {
		if a.scale != b.scale {
			return a.scale < b.scale
		}
		if a.bucket != b.bucket {
			return a.bucket < b.bucket
		}
		return a.id < b.id
	}
	return &mutexBTree{now: now, tree: btree.NewG(32, less)}
}

// CheckRate counts one hit and reports whether it is within limit.
func (l *mutexBTree) CheckRate(id string, scaleMs, limit int64) bool {
	bucket := l.now() / (scaleMs * int64(time.Millisecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probe = window{id: id, scale: scaleMs, bucket: bucket}
	w, ok := l.tree.Get(&l.probe)
	if !ok {
		w = &window{id: id, scale: scaleMs, bucket: bucket}
		l.tree.ReplaceOrInsert(w)
	}
	w.count++
	return w.count <= limit
}
