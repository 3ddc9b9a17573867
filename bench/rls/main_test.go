package rls

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if d, err := binDir(); err == nil {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
