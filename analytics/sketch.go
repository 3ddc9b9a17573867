package analytics

import (
	"slices"
	"strings"
)

// sketch is a space-saving sketch (Metwally, Agrawal, El Abbadi 2005): m
// counters, each a key, a count and the most it may overcount. A key
// already counted adds to its counter; a new key takes over the smallest
// counter and starts from its count plus one. Any key counted more than
// total/m times is held, and the count of a held key is at most its error
// above the truth. The counters form a min-heap on count. Not safe for
// concurrent use.
type sketch struct {
	heap []counter
	pos  map[string]int // key -> index in heap
}

type counter struct {
	key   string
	count uint64
	err   uint64
}

func newSketch(m int) *sketch {
	return &sketch{heap: make([]counter, 0, m), pos: make(map[string]int, m)}
}

// add counts one hit of key; it keeps a copy of key, never key itself.
func (s *sketch) add(key string) {
	if i, ok := s.pos[key]; ok {
		s.heap[i].count++
		s.down(i)
		return
	}
	key = strings.Clone(key)
	if len(s.heap) < cap(s.heap) {
		s.heap = append(s.heap, counter{key: key, count: 1})
		s.pos[key] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	least := &s.heap[0]
	delete(s.pos, least.key)
	least.key, least.err = key, least.count
	least.count++
	s.pos[key] = 0
	s.down(0)
}

// top returns the k counters with the highest counts, highest first, ties
// by key.
func (s *sketch) top(k int) []TopGroup {
	all := make([]TopGroup, len(s.heap))
	for i, c := range s.heap {
		all[i] = TopGroup{Group: c.key, Count: c.count, MaxError: c.err}
	}
	slices.SortFunc(all, byCount)
	return all[:min(k, len(all))]
}

// byCount orders the heaviest first, ties by group id.
func byCount(a, b TopGroup) int {
	switch {
	case a.Count != b.Count:
		if a.Count > b.Count {
			return -1
		}
		return 1
	case a.Group < b.Group:
		return -1
	case a.Group > b.Group:
		return 1
	}
	return 0
}

func (s *sketch) reset() {
	clear(s.heap)
	s.heap = s.heap[:0]
	clear(s.pos)
}

func (s *sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.pos[s.heap[i].key] = i
	s.pos[s.heap[j].key] = j
}

func (s *sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].count <= s.heap[i].count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *sketch) down(i int) {
	n := len(s.heap)
	for {
		l, small := 2*i+1, i
		if l < n && s.heap[l].count < s.heap[small].count {
			small = l
		}
		if r := l + 1; r < n && s.heap[r].count < s.heap[small].count {
			small = r
		}
		if small == i {
			return
		}
		s.swap(i, small)
		i = small
	}
}
