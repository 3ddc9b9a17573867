package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
)

func TestClusterKeyFile(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("k", cluster.MinPartitionKeyLen)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	cases := []struct {
		name, file string
		want       string // the key set, "" when none
		err        string // part of the error, "" when none
	}{
		{name: "no flag"},
		{name: "key with a newline", file: write("good", long+"\n"), want: long},
		{name: "key without one", file: write("bare", long), want: long},
		{name: "too short", file: write("short", "abc\n"), err: "the key is 3 bytes"},
		{name: "missing file", file: filepath.Join(dir, "absent"), err: "-cluster-key-file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg cluster.Config
			err := clusterKey(&cfg, clusterFlags{keyFile: c.file})
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				assert.Nil(t, cfg.PartitionKey, "a refused key file sets nothing")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, string(cfg.PartitionKey))
		})
	}
}
