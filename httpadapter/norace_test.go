//go:build !race

package httpadapter_test

const raceEnabled = false
