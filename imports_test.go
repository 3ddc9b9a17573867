package actorlimit_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/actorlimit/actorlimit"

// ourImports returns, for every package of the module (tests left out),
// the packages of ours it imports: directly, or with deps, through any
// chain. Paths are relative to the module ("" is the root).
func ourImports(t *testing.T, deps bool) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	field := "Imports"
	if deps {
		field = "Deps"
	}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .`+field+`}} {{.}}{{end}}`, "./...").Output()
	require.NoError(t, err, "go list")
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, _ := rel(f[0])
		m[pkg] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				m[pkg] = append(m[pkg], r)
			}
		}
	}
	return m
}

// name names a package of ours in a test's name.
func name(pkg string) string {
	if pkg == "" {
		return "root"
	}
	return pkg
}

// TestImportRules enforces the rules of docs/architecture.md: imports point
// one way, no store imports the actor or the root, the janitor never sees a
// store, the middleware talks to the public API only. "" is the root.
func TestImportRules(t *testing.T) {
	direct, all := ourImports(t, false), ourImports(t, true)
	never := []struct {
		pkg, never string
		deps       bool // through any chain, not only directly
		why        string
	}{
		{"table", "actor", true, "no store imports the actor"},
		{"table", "", true, "no store imports the root"},
		{"redisstore", "actor", true, "no store imports the actor"},
		{"redisstore", "", true, "no store imports the root"},
		{"algo", "table", true, "the algorithms are below every store"},
		{"persist", "actor", true, "persistence is below the actor"},
		{"janitor", "table", true, "the janitor never sees a store"},
		{"actor", "", true, "no upward import"},
		{"actor", "httpadapter", true, "no upward import"},
		{"", "table", false, "the public API goes through the actor"},
		{"", "janitor", false, "the public API goes through the actor"},
		{"", "httpadapter", true, "no upward import"},
		{"httpadapter", "actor", false, "the middleware talks to the public API only"},
		{"httpadapter", "table", false, "the middleware talks to the public API only"},
		{"cluster", "actor", false, "a Backend is written against the root (BackendStats), not the actor"},
		{"quota", "service", true, "the quota service and the rate limit service stand side by side"},
		{"service", "quota", true, "the quota service and the rate limit service stand side by side"},
		{"quota", "actor", false, "the quota service uses the public API only"},
		{"service", "service/unary", true, "the transport serves the service's bytes; the service knows no transport"},
		{"service/unary", "service", true, "the transport knows no service: actorlimitd wires them"},
	}
	for _, n := range never {
		t.Run(name(n.pkg)+"-never-"+name(n.never), func(t *testing.T) {
			imports := direct
			if n.deps {
				imports = all
			}
			got, ok := imports[n.pkg]
			require.True(t, ok, "package %q is not in the module", n.pkg)
			assert.NotContains(t, got, n.never, "%q imports %q: %s", n.pkg, n.never, n.why)
		})
	}
	assert.Equal(t, []string{""}, direct["httpadapter"], "httpadapter imports the root only")
	assert.Equal(t, []string{""}, direct["service"], "the service's core imports the root only")
	for pkg, deps := range all {
		if pkg == "service" || strings.HasPrefix(pkg, "cmd/") {
			continue
		}
		assert.NotContains(t, deps, "service", "%s imports the service: the library never does", name(pkg))
	}
	for _, pkg := range []string{"algo", "janitor"} {
		assert.Empty(t, direct[pkg], "%s imports nothing of ours", pkg)
	}
}
