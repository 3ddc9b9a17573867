// Package certs reads certificates from files and reads them again when
// the files change, so that a certificate rotated on disk (a Kubernetes
// Secret updated, cert-manager's renewal) is presented at the next
// handshake without a restart.
package certs

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// Stamp is what tells that a file changed: its modification time, size,
// device and inode (a file renamed over it is another inode, even when
// written within the same clock tick and of the same size), zero when it
// cannot be read.
type Stamp struct {
	mod      time.Time
	size     int64
	dev, ino uint64
}

// StampOf returns path's Stamp now (through symlinks).
func StampOf(path string) Stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return Stamp{}
	}
	st := Stamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), sys.Ino
	}
	return st
}

// KeyPair is a certificate and its key read from two files, read again at
// a handshake when either file changed since. A change that does not make
// a certificate and its key leaves the last good pair in use (logged once
// a change). It is safe for concurrent use.
type KeyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu     sync.Mutex
	stamps [2]Stamp
	failed [2]Stamp
	cert   *tls.Certificate
}

// NewKeyPair reads certFile and keyFile (PEM): an error when they do not
// make a certificate and its key. log may be nil.
func NewKeyPair(certFile, keyFile string, log *slog.Logger) (*KeyPair, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &KeyPair{certFile: certFile, keyFile: keyFile, log: log}
	k.stamps = k.stampsNow()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certFile, keyFile, err)
	}
	k.cert = &cert
	return k, nil
}

func (k *KeyPair) stampsNow() [2]Stamp { return [2]Stamp{StampOf(k.certFile), StampOf(k.keyFile)} }

// Current returns the pair as the files hold it now, or the last good one.
func (k *KeyPair) Current() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	stamps := k.stampsNow()
	if stamps == k.stamps {
		return k.cert
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if stamps != k.failed {
			k.failed = stamps
			k.log.Warn("the certificate's files changed and do not make a certificate and its key: the one read before stays in use",
				"cert", k.certFile, "key", k.keyFile, "err", err)
		}
		return k.cert
	}
	k.stamps, k.cert = stamps, &cert
	k.log.Info("the certificate's files were read again", "cert", k.certFile)
	return k.cert
}

// GetCertificate is Current as tls.Config's GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Current(), nil
}
