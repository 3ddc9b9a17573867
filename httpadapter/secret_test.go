package httpadapter_test

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

const (
	testToken = "Bearer eyJhbGciOi.s3cr3t-session-token"
	testKey   = "0123456789abcdef-a-test-key"
)

// macHex is the field a secret value becomes under testKey.
func macHex(v string) string {
	h := hmac.New(sha256.New, []byte(testKey))
	h.Write([]byte(v))
	return hex.EncodeToString(h.Sum(nil))[:httpadapter.SecretHexLength]
}

// groups records the Group of every observation.
type groups struct {
	mu  sync.Mutex
	all []string
}

func (g *groups) Observe(o httpadapter.Observation) {
	g.mu.Lock()
	g.all = append(g.all, strings.Clone(o.Group))
	g.mu.Unlock()
}

// TestSecretValuesAreHashed: every cookie, the Authorization,
// Proxy-Authorization and Cookie headers and what a rule lists in Secret
// reach the limiter (and the observers) only as the HMAC of the value under
// the key; other values stay as they are.
func TestSecretValuesAreHashed(t *testing.T) {
	tests := []struct {
		name    string
		groupBy string
		secret  []string
		set     func(r *http.Request)
		value   string // the value grouped by
		hashed  bool
	}{
		{"authorization", "header:Authorization", nil, func(r *http.Request) { r.Header.Set("Authorization", testToken) }, testToken, true},
		{"authorization any case", "header:authorization", nil, func(r *http.Request) { r.Header.Set("Authorization", testToken) }, testToken, true},
		{"proxy-authorization", "header:Proxy-Authorization", nil, func(r *http.Request) { r.Header.Set("Proxy-Authorization", testToken) }, testToken, true},
		{"cookie header", "header:Cookie", nil, func(r *http.Request) { r.Header.Set("Cookie", "sid="+testToken) }, "sid=" + testToken, true},
		{"a cookie", "cookie:sid", nil, func(r *http.Request) { r.Header.Set("Cookie", "a=b; sid="+testToken) }, testToken, true},
		{"a header marked secret", "header:X-Api-Key", []string{"header:x-api-key"}, func(r *http.Request) { r.Header.Set("X-Api-Key", testToken) }, testToken, true},
		{"a query marked secret", "query:key", []string{"query:key"}, func(r *http.Request) { r.URL.RawQuery = "key=" + strings.ReplaceAll(testToken, " ", "+") }, testToken, true},
		{"a header not marked", "header:X-Api-Key", nil, func(r *http.Request) { r.Header.Set("X-Api-Key", testToken) }, testToken, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, obs := newFake(), &groups{}
			m, err := httpadapter.New(f, httpadapter.Config{
				SecretKey: []byte(testKey),
				Observers: []httpadapter.Observer{obs},
				Rules: []httpadapter.Rule{{Name: "r", GroupBy: []string{tt.groupBy}, Secret: tt.secret,
					Policy: actorlimit.Policy{Limit: 5, Period: 60e9}}},
			})
			require.NoError(t, err)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			tt.set(r)
			m.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
			_, ids := f.snapshot()
			require.Len(t, ids, 1)
			require.Len(t, obs.all, 1)
			if !tt.hashed {
				assert.Contains(t, ids[0], tt.value)
				return
			}
			assert.NotContains(t, ids[0], "s3cr3t", "no part of the secret in the id")
			want := "32:" + macHex(tt.value)
			assert.True(t, strings.HasSuffix(ids[0], want), "id %q ends with %q", ids[0], want)
			assert.Equal(t, want, obs.all[0], "the observers see the hashed form")
		})
	}
}

// TestSecretKey: a middleware without SecretKey hashes under its process's
// key (two middlewares of one process agree; neither uses an empty key);
// two with the same SecretKey agree; another key gives other ids; a key
// shorter than MinSecretKey is refused.
func TestSecretKey(t *testing.T) {
	idOf := func(key []byte) string {
		f := newFake()
		m, err := httpadapter.New(f, httpadapter.Config{SecretKey: key, Rules: []httpadapter.Rule{{
			Name: "r", GroupBy: []string{"cookie:sid"}, Policy: actorlimit.Policy{Limit: 5, Period: 60e9}}}})
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Cookie", "sid=abc")
		m.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
		_, ids := f.snapshot()
		require.Len(t, ids, 1)
		return ids[0]
	}
	process := idOf(nil)
	assert.Equal(t, process, idOf(nil), "one key per process")
	h := hmac.New(sha256.New, nil)
	h.Write([]byte("abc"))
	assert.NotContains(t, process, hex.EncodeToString(h.Sum(nil))[:32], "the process key is not empty")
	assert.Equal(t, idOf([]byte(testKey)), idOf([]byte(testKey)))
	assert.NotEqual(t, idOf([]byte(testKey)), idOf([]byte(testKey+"2")))
	assert.NotEqual(t, process, idOf([]byte(testKey)))

	_, err := httpadapter.New(newFake(), httpadapter.Config{SecretKey: []byte("short"), AllowNoRules: true})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "SecretKey is 5 bytes, fewer than the 16 wanted")
}

// TestSecretRulesErrors: Secret names items of GroupBy, of a header or a
// query, in Go and in a rules file.
func TestSecretRulesErrors(t *testing.T) {
	tests := []struct {
		name, groupBy, secret, want string
	}{
		{"not in group_by", "header:X-A", "header:X-B", `secret[0]: "header:X-B" is not in group_by`},
		{"an ip", "ip", "ip", `secret[0]: "ip": only header:NAME and query:NAME values are hashed on request (cookies always are)`},
		{"not a characteristic", "ip", "nope", `secret[0]: "nope" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{
				Name: "r", GroupBy: []string{tt.groupBy}, Secret: []string{tt.secret}, Policy: actorlimit.Policy{Limit: 5, Period: 60e9}}}})
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)

			_, err = httpadapter.ParseRules([]byte("rules:\n  - name: r\n    group_by: [" + tt.groupBy + "]\n    secret: [" + tt.secret + "]\n    policy: {limit: 1, period: 1m}\n"))
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), `line 2: rule "r": `+tt.want)
		})
	}
	rules, err := httpadapter.ParseRules([]byte("rules:\n  - name: r\n    group_by: [header:X-Api-Key]\n    secret: [header:X-Api-Key]\n    policy: {limit: 1, period: 1m}\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"header:X-Api-Key"}, rules[0].Secret)
}

// TestSecretCommand: the command docs/security.md gives to find a token's
// group prints the hex digits the middleware puts into the id. It runs
// the command as written, with sh and openssl.
func TestSecretCommand(t *testing.T) {
	cmdLine := docCommand(t, "../docs/security.md", `printf %s "$TOKEN" | openssl dgst`)
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is not installed")
		}
		t.Skip("openssl is not installed")
	}
	f := newFake()
	m, err := httpadapter.New(f, httpadapter.Config{SecretKey: []byte(testKey), Rules: []httpadapter.Rule{{
		Name: "r", GroupBy: []string{"header:Authorization"}, Policy: actorlimit.Policy{Limit: 5, Period: 60e9}}}})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", testToken)
	m.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
	_, ids := f.snapshot()
	require.Len(t, ids, 1)

	cmd := exec.Command("sh", "-c", cmdLine)
	cmd.Env = append(os.Environ(), "TOKEN="+testToken, "KEY="+testKey)
	out, err := cmd.Output()
	require.NoError(t, err, "%s", cmdLine)
	got := strings.TrimSpace(string(out))
	require.Len(t, got, httpadapter.SecretHexLength, "%s printed %q", cmdLine, out)
	assert.True(t, strings.HasSuffix(ids[0], "32:"+got), "id %q, command %q", ids[0], got)
}

// docCommand returns the line of the doc at path that starts with prefix,
// after its indentation.
func docCommand(t *testing.T, path, prefix string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s has no line starting with %q", path, prefix)
	return ""
}
