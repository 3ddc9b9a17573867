package actorlimit

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/persist"
)

// shardSeed keys the hash of ids onto shards. A limiter without persistence
// draws it at random when it starts; one with [WithPersistence] and more
// than one shard keeps it in its directory (see shardLayout), so that every
// id comes back to the shard whose files hold its state.
type shardSeed uint64

// randomSeed returns a seed no caller can guess, so that nobody can choose
// ids that all land on one shard.
func randomSeed() shardSeed {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if it cannot read)
	return shardSeed(binary.LittleEndian.Uint64(b[:]))
}

// index returns the shard of id among n > 1 shards: the same for the same
// seed in every process and on every platform. It reads id eight bytes at a
// time, mixes each word into the state with a multiply and a shift, and
// finishes with the splitmix64 finalizer; it allocates nothing.
func (s shardSeed) index(id string, n int) int {
	const (
		k0 = 0x9e3779b97f4a7c15
		k1 = 0xbf58476d1ce4e5b9
		k2 = 0x94d049bb133111eb
	)
	h := uint64(s) ^ uint64(len(id))*k0
	for ; len(id) >= 8; id = id[8:] {
		w := uint64(id[0]) | uint64(id[1])<<8 | uint64(id[2])<<16 | uint64(id[3])<<24 |
			uint64(id[4])<<32 | uint64(id[5])<<40 | uint64(id[6])<<48 | uint64(id[7])<<56
		h = (h ^ w) * k1
		h ^= h >> 29
	}
	var w uint64
	for i := range len(id) {
		w |= uint64(id[i]) << (8 * i)
	}
	h = (h ^ w) * k1
	h ^= h >> 30
	h *= k2
	h ^= h >> 31
	// Multiply-shift maps h onto [0, n) with no division.
	hi := (h >> 32) * uint64(n)
	return int(hi >> 32)
}

// shardsFile is the file, in a persistence directory of more than one
// shard, that holds the shard count and the seed; each shard's files are in
// a directory of its own beside it (shardDir).
const shardsFile = "shards"

// shardsHeader begins shardsFile.
const shardsHeader = "actorlimit shards v1"

// snapshotFile is the snapshot a one-shard limiter keeps in its directory
// (package persist writes it at every start): its presence tells a
// directory of one shard.
const snapshotFile = "snapshot"

// shardDir returns the directory of shard i's files within dir.
func shardDir(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%d", i))
}

// shardJournals makes the Journals of a limiter of more than one shard
// persisted in cfg.persistDir, with pc: each shard keeps its files in a
// directory of its own, beside the file that holds the shard count and the
// seed of the hash of ids onto the shards (see shardLayout).
func (cfg *settings) shardJournals(pc PersistConfig) error {
	seed, err := shardLayout(pc, cfg.persistDir, cfg.shards)
	if err != nil {
		return fmt.Errorf("WithPersistence: %w", err)
	}
	cfg.seed, cfg.seeded = seed, true
	for i := range cfg.shards {
		j, err := persist.New(shardDir(cfg.persistDir, i), pc)
		if err != nil {
			return fmt.Errorf("%w: WithPersistence: %w", ErrInvalidArgument, err)
		}
		cfg.journals = append(cfg.journals, &journal{Journal: j})
	}
	return nil
}

// sumLoaded returns what the shards' journals loaded, as one: the counts
// summed, the latest snapshot generation, the files set aside by any,
// Discarded if any shard started empty, the first Unwritable.
func sumLoaded(js []actor.Journal) PersistLoaded {
	var sum PersistLoaded
	for _, aj := range js {
		j, ok := aj.(*journal)
		if !ok {
			continue
		}
		ld := j.loaded
		sum.Generation = max(sum.Generation, ld.Generation)
		sum.Records += ld.Records
		sum.Skipped += ld.Skipped
		sum.Frames += ld.Frames
		sum.TornBytes += ld.TornBytes
		sum.Discarded = sum.Discarded || ld.Discarded
		sum.SetAside = append(sum.SetAside, ld.SetAside...)
		if sum.Unwritable == nil {
			sum.Unwritable = ld.Unwritable
		}
	}
	return sum
}

// shardLayout returns the seed of a limiter of n > 1 shards persisted in
// dir: the one stored there, or, in a directory that holds no state yet, a
// new one, which it stores. A directory written with another number of
// shards is an error wrapping ErrInvalidArgument that names both, and
// changes nothing: ids would hash onto other shards than the ones whose
// files hold their state. A damaged shards file is an error wrapping
// ErrCorrupt. A directory that cannot be read or written is an error
// wrapping ErrUnwritable, unless pc.StartUnwritable: then the shards get a
// seed of their own, as their journals serve in memory only.
func shardLayout(pc PersistConfig, dir string, n int) (shardSeed, error) {
	fsys := orOS(pc.FS)
	unwritable := func(err error) (shardSeed, error) {
		if pc.StartUnwritable {
			return randomSeed(), nil
		}
		return 0, fmt.Errorf("%w: %s: %w", ErrUnwritable, dir, err)
	}
	name := filepath.Join(dir, shardsFile)
	b, err := fsys.ReadFile(name)
	switch {
	case err == nil:
		stored, seed, perr := parseShards(b)
		if perr != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, perr)
		}
		if stored != n {
			return 0, fmt.Errorf("%w: %s holds the state of %d shards, not %d: start with WithShards(%d)", ErrInvalidArgument, dir, stored, n, stored)
		}
		return seed, nil
	case !errors.Is(err, fs.ErrNotExist):
		return unwritable(err)
	}
	if one, err := exists(fsys, filepath.Join(dir, snapshotFile)); err != nil {
		return unwritable(err)
	} else if one {
		return 0, fmt.Errorf("%w: %s holds the state of one shard, not %d: start with WithShards(1)", ErrInvalidArgument, dir, n)
	}
	seed := randomSeed()
	if err := writeShards(fsys, dir, n, seed); err != nil {
		return unwritable(err)
	}
	return seed, nil
}

// checkOneShard returns an error wrapping ErrInvalidArgument if dir holds
// the state of more than one shard: a limiter of one shard would not see
// it. A shards file it cannot read is left to the journal, which reports
// the directory's trouble as it does for one shard.
func checkOneShard(fsys persist.FS, dir string) error {
	b, err := orOS(fsys).ReadFile(filepath.Join(dir, shardsFile))
	if err != nil {
		return nil
	}
	stored, _, err := parseShards(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, filepath.Join(dir, shardsFile), err)
	}
	return fmt.Errorf("%w: %s holds the state of %d shards, not 1: start with WithShards(%d)", ErrInvalidArgument, dir, stored, stored)
}

// orOS returns fsys, or the operating system's file system if it is nil
// (as package persist takes a nil FS).
func orOS(fsys persist.FS) persist.FS {
	if fsys == nil {
		return persist.OS
	}
	return fsys
}

func exists(fsys persist.FS, name string) (bool, error) {
	_, err := fsys.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// parseShards reads shardsFile's text: the header, then "<n> <seed in hex>".
func parseShards(b []byte) (n int, seed shardSeed, err error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != shardsHeader {
		return 0, 0, errors.New("not a shards file of actorlimit")
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 {
		return 0, 0, errors.New("damaged: want the shard count and the seed")
	}
	n, err = strconv.Atoi(f[0])
	if err != nil || n < 2 || n > MaxShards {
		return 0, 0, fmt.Errorf("damaged: shard count %q", f[0])
	}
	s, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("damaged: seed %q", f[1])
	}
	return n, shardSeed(s), nil
}

// writeShards writes shardsFile durably: to a temporary file, synced, then
// renamed over, and the directory synced.
func writeShards(fsys persist.FS, dir string, n int, seed shardSeed) error {
	if fsys == persist.OS {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	tmp, final := filepath.Join(dir, shardsFile+".tmp"), filepath.Join(dir, shardsFile)
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\n%d %016x\n", shardsHeader, n, uint64(seed))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, final)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	return err
}
