package main

import (
	"os"
	"testing"
)

// runMainEnv, set to 1, makes the test binary run main instead of the
// tests: TestProcessStderrIsSlogOnly runs the example as a process so.
const runMainEnv = "MOCHI_LIKE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"mochi-like"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
