// Package bench measures actorlimit against the alternatives a Go user
// would pick: the same fixed window behind a sync.Mutex, around the same
// B-tree and around a map. It is a module of its own, so that whatever it
// compares against never enters the library's go.mod.
//
// Run it with:
//
//	cd bench && go test -run=^$ -bench=. -count=10 | tee new.txt && benchstat new.txt
package bench
