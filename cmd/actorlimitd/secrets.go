package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/actorlimit/actorlimit/service"
)

// edgeFlags are the flags of what the service keeps of what clients send:
// secret descriptor values, and hits_addend's bound.
type edgeFlags struct {
	secretKeyFile string
	secretKeys    string
	maxHitsAddend uint64
}

// register adds the edge flags to fs.
func (e *edgeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.secretKeyFile, "secret-key-file", "", "file holding the key (at least 16 bytes; trailing newlines dropped) of the HMAC-SHA256 that hides secret descriptor values and long ones; every process sharing counts needs the same (default: a random key per process, refused with -redis, -persist or a cluster)")
	fs.StringVar(&e.secretKeys, "secret-descriptor-keys", strings.Join(service.DefaultSecretKeys, ","), "descriptor keys whose values are secret, kept only as their HMAC (comma separated; '' for none, as envoy ratelimit)")
	fs.Uint64Var(&e.maxHitsAddend, "max-hits-addend", 0, "count a hits_addend above this as this bound, never refused (0: unbounded, as envoy ratelimit)")
	if fl := fs.Lookup("max-value-length"); fl != nil { // defined in main.go; what it means is said here
		fl.Usage = "values longer than this (bytes) are counted under their digest, never refused"
	}
}

// secrets returns the service's Secrets the flags ask for; shared says
// whether the counts are shared with other processes or kept across
// restarts (-redis, -persist, a cluster).
func (e edgeFlags) secrets(shared bool) (service.Secrets, error) {
	s := service.Secrets{Keys: splitList(e.secretKeys)}
	if s.Keys == nil {
		s.Keys = []string{}
	}
	if e.secretKeyFile != "" {
		key, err := readSecretKey(e.secretKeyFile)
		if err != nil {
			return s, err
		}
		s.Key = key
		return s, nil
	}
	if shared && len(s.Keys) > 0 {
		return s, fmt.Errorf("the values of the secret descriptor keys (%s) are kept as their HMAC, and the counts are shared or kept (-redis, -persist or a cluster): "+
			"every process, and every restart, needs the same key: make one with `(umask 077 && head -c 32 /dev/urandom > secret.key)` "+
			"and give every process -secret-key-file secret.key; or keep those values in clear, as envoy ratelimit does, with -secret-descriptor-keys ''",
			strings.Join(s.Keys, ", "))
	}
	return s, nil
}

// readSecretKey reads the key of -secret-key-file: the file's bytes
// without their trailing newlines, as examples/mochi-like reads its own.
func readSecretKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-secret-key-file: %w", err)
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) < service.MinSecretKey {
		return nil, fmt.Errorf("-secret-key-file %s: the key is %d bytes, fewer than the %d wanted (make one with: head -c 32 /dev/urandom > %s)", path, len(b), service.MinSecretKey, path)
	}
	return b, nil
}
