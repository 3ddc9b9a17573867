package table

import (
	"github.com/actorlimit/actorlimit/algo"
)

// GCRA decides n hits for k at now (Unix ns) by [algo.GCRAHit], with
// k.Scale as the period: with the emission interval T = k.Scale/limit, the
// hits are allowed iff max(TAT, now) + n*T - now <= burst*T, and then TAT
// becomes max(TAT, now) + n*T. Denied hits change nothing. limit and burst
// must be positive and burst*T at most [algo.MaxSpan].
func (t *Table) GCRA(k Key, limit, burst, n, now int64) algo.Decision {
	var d algo.Decision
	t.gcra(k, limit, burst, n, now, &d)
	return d
}

// gcra is [Table.GCRA], writing the decision to d.
func (t *Table) gcra(k Key, limit, burst, n, now int64, d *algo.Decision) {
	e, s := t.bucketOf(k)
	var changed bool
	*d, changed = algo.GCRAHit(&s, k.Scale, limit, burst, n, now)
	t.putBucket(k, e, &s, d, changed, now)
}

// PeekGCRA reports k's state at now as [Table.GCRA] sees it, and whether one
// more hit would be allowed, without changing anything.
func (t *Table) PeekGCRA(k Key, limit, burst, now int64) algo.Decision {
	_, s := t.bucketOf(k)
	return algo.GCRAPeek(s, k.Scale, limit, burst, now)
}

// Entry fields of the bucket algorithms ([algo.BucketState]): Modified
// holds F's whole nanoseconds (Empty), Created its fraction's numerator
// (Frac), Count its denominator (Rate, the Limit of the last change).

// bucketOf returns k's node, or 0, and its state as a bucket.
func (t *Table) bucketOf(k Key) (uint32, algo.BucketState) {
	r, i := t.find2(k)
	if i == 0 {
		return 0, algo.BucketState{}
	}
	e := t.at(i)
	var rate, frac, empty int64
	if ref, ok := r.ref(e.Window); ok && !e.wide() && r.codec == codecBucket {
		rate, frac, empty = r.unpackBucket(e.w, ref)
	} else {
		rate, frac, empty = t.words(e, r)
	}
	return i, algo.BucketState{Empty: empty, Frac: frac, Rate: rate}
}

// putBucket stores s, the state of k after a hit at now decided d, in node
// i (inserting it if i is 0 and s changed) and files e under the bucket of
// s's death: now plus d.ResetAfter, the wait until the key is back to full
// capacity, which is [algo.BucketState.Death]. An existing entry gets the
// hit's chances against eviction.
func (t *Table) putBucket(k Key, i uint32, s *algo.BucketState, d *algo.Decision, changed bool, now int64) {
	if i != 0 {
		record(t.at(i), d.Allowed)
	}
	if !changed {
		return
	}
	b := deathBucket(now+int64(d.ResetAfter), k.Scale)
	if i == 0 {
		i = t.insert(k, b)
	}
	t.move(i, b)
	e := t.at(i)
	r := t.runs[e.run]
	if ref, ok := r.ref(b); ok && !e.wide() && r.codec == codecBucket {
		if w, ok := r.packBucket(ref, s.Rate, s.Frac, s.Empty); ok {
			e.w = w
			return
		}
	}
	t.setWords(e, r, s.Rate, s.Frac, s.Empty)
}
