package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/service"
)

// envoyRatelimit is envoy ratelimit's module at the version whose settings
// env.go's table follows (bench/rls's differential runs the same).
const envoyRatelimit = "github.com/envoyproxy/ratelimit@v1.4.1-0.20260122083618-3fb702589d36"

// withEnv makes parseFlags read env as the process's environment.
func withEnv(t *testing.T, env map[string]string) {
	t.Helper()
	old := lookupEnv
	lookupEnv = func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	t.Cleanup(func() { lookupEnv = old })
}

// parseEnv parses args with env as the environment, returning the flags
// and the flag set's values.
func parseEnv(t *testing.T, env map[string]string, args ...string) (flags, map[string]string, error) {
	t.Helper()
	withEnv(t, env)
	f, err := parseFlags(args, io.Discard)
	values := map[string]string{}
	if f.compat.fs != nil {
		f.compat.fs.VisitAll(func(fl *flag.Flag) { values[fl.Name] = fl.Value.String() })
	}
	return f, values, err
}

// envoyDefaults are the flags envoy ratelimit's environment sets when none
// of its variables but one is given.
var envoyDefaults = map[string]string{
	"http-addr": "0.0.0.0:8080", "grpc-addr": "0.0.0.0:8081", "debug-addr": "0.0.0.0:6070",
	"log-level": "warn", "log-format": "text", "config": "/srv/runtime_data/current/config",
	"grpc-max-connection-age": "24h0m0s", "grpc-max-connection-age-grace": "1h0m0s",
	"secret-descriptor-keys": "", "redis": "", "redis-denied-cache": "0s", "tls-cert": "",
}

// TestEnvEveryVariable sets each of envoy ratelimit's variables alone and
// checks the flags it sets (beyond envoy ratelimit's defaults), or that it
// is logged as ignored, or the error it gives.
func TestEnvEveryVariable(t *testing.T) {
	tmp := t.TempDir()
	cert, key := filepath.Join(tmp, "c.pem"), filepath.Join(tmp, "k.pem")
	type want struct {
		value string
		flags map[string]string // beyond envoyDefaults
		err   string            // the error, instead
	}
	cases := map[string]want{
		"HOST":                          {"10.1.2.3", map[string]string{"http-addr": "10.1.2.3:8080"}, ""},
		"PORT":                          {"9000", map[string]string{"http-addr": "0.0.0.0:9000"}, ""},
		"DEBUG_HOST":                    {"127.0.0.1", map[string]string{"debug-addr": "127.0.0.1:6070"}, ""},
		"DEBUG_PORT":                    {"7000", map[string]string{"debug-addr": "0.0.0.0:7000"}, ""},
		"GRPC_UDS":                      {"/run/rl.sock", map[string]string{"grpc-addr": "unix:/run/rl.sock"}, ""},
		"GRPC_HOST":                     {"::1", map[string]string{"grpc-addr": "[::1]:8081"}, ""},
		"GRPC_PORT":                     {"9001", map[string]string{"grpc-addr": "0.0.0.0:9001"}, ""},
		"GRPC_MAX_CONNECTION_AGE":       {"5m", map[string]string{"grpc-max-connection-age": "5m0s"}, ""},
		"GRPC_MAX_CONNECTION_AGE_GRACE": {"30s", map[string]string{"grpc-max-connection-age-grace": "30s"}, ""},
		"GRPC_SERVER_USE_TLS":           {"true", nil, "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
		"GRPC_SERVER_TLS_CERT":          {cert, map[string]string{}, ""}, // without GRPC_SERVER_USE_TLS: not read
		"GRPC_SERVER_TLS_KEY":           {key, map[string]string{}, ""},
		"GRPC_CLIENT_TLS_CACERT":        {cert, map[string]string{"tls-client-ca": ""}, ""},
		"GRPC_CLIENT_TLS_SAN":           {"client.example", map[string]string{"tls-client-san": ""}, ""},
		"LOG_LEVEL":                     {"DEBUG", map[string]string{"log-level": "debug"}, ""},
		"LOG_FORMAT":                    {"json", map[string]string{"log-format": "json"}, ""},
		"RUNTIME_ROOT":                  {"/data", map[string]string{"config": "/data/config"}, ""},
		"RUNTIME_SUBDIRECTORY":          {"ratelimit", map[string]string{"config": "/srv/runtime_data/current/ratelimit/config"}, ""},
		"RUNTIME_APPDIRECTORY":          {"rules", map[string]string{"config": "/srv/runtime_data/current/rules"}, ""},
		"RUNTIME_IGNOREDOTFILES":        {"true", map[string]string{}, ""},
		"RUNTIME_WATCH_ROOT":            {"false", map[string]string{}, ""},
		"LOCAL_CACHE_SIZE_IN_BYTES":     {"1048576", map[string]string{"redis-denied-cache": "24h0m0s"}, ""},
		"USE_PROMETHEUS":                {"true", map[string]string{"metrics-addr": ":9090", "metrics-path": "/metrics"}, ""},
		"PROMETHEUS_ADDR":               {"127.0.0.1:9191", map[string]string{"metrics-addr": "127.0.0.1:9191", "metrics-path": "/metrics"}, ""},
		"PROMETHEUS_PATH":               {"/prom", map[string]string{"metrics-addr": ":9090", "metrics-path": "/prom"}, ""},
		"NEAR_LIMIT_RATIO":              {"0.5", map[string]string{"near-limit-ratio": "0.5"}, ""},
		"CACHE_KEY_PREFIX":              {"rl_", map[string]string{"redis-key-prefix": "rl_"}, ""},
		"BACKEND_TYPE":                  {"memcache", nil, "BACKEND_TYPE=memcache: memcached is not a backend"},
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": {"true", map[string]string{"all-or-nothing": "true"}, ""},
		"LIMIT_RESPONSE_HEADERS_ENABLED":          {"true", map[string]string{"response-headers": "true"}, ""},
		"LIMIT_LIMIT_HEADER":                      {"X-Limit", nil, `LIMIT_LIMIT_HEADER="X-Limit": actorlimitd's header is RateLimit-Limit`},
		"LIMIT_REMAINING_HEADER":                  {"X-Remaining", nil, `LIMIT_REMAINING_HEADER="X-Remaining"`},
		"LIMIT_RESET_HEADER":                      {"X-Reset", nil, `LIMIT_RESET_HEADER="X-Reset"`},
		"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": {"true", map[string]string{}, ""},
		"REDIS_SOCKET_TYPE":                       {"tcp", map[string]string{"redis-socket-type": "tcp"}, ""},
		"REDIS_TYPE":                              {"CLUSTER", map[string]string{"redis-type": "CLUSTER"}, ""},
		"REDIS_URL":                               {"redis.ns:6379", map[string]string{"redis": "redis.ns:6379"}, ""},
		"REDIS_POOL_SIZE":                         {"20", map[string]string{"redis-pool-size": "20"}, ""},
		"REDIS_AUTH":                              {"user:pw", map[string]string{"redis-auth": "user:pw"}, ""},
		"REDIS_TLS":                               {"true", map[string]string{"redis-tls": "true"}, ""},
		"REDIS_TLS_CLIENT_CERT":                   {cert, map[string]string{"redis-tls-cert": cert}, "-redis-tls-cert and -redis-tls-key go together"},
		"REDIS_TLS_CLIENT_KEY":                    {key, map[string]string{"redis-tls-key": key}, "-redis-tls-cert and -redis-tls-key go together"},
		"REDIS_TLS_CACERT":                        {cert, map[string]string{"redis-tls-ca": cert}, ""},
		"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION":    {"true", map[string]string{"redis-tls-skip-hostname-verification": "true"}, ""},
		"REDIS_PERSECOND":                         {"true", nil, "-redis-persecond needs -redis"},
		"REDIS_PERSECOND_SOCKET_TYPE":             {"tcp", map[string]string{"redis-persecond-socket-type": "tcp"}, ""},
		"REDIS_PERSECOND_TYPE":                    {"SENTINEL", map[string]string{"redis-persecond-type": "SENTINEL"}, ""},
		"REDIS_PERSECOND_URL":                     {"r2:6379", nil, "-redis-persecond-url is read only with -redis-persecond"},
		"REDIS_PERSECOND_POOL_SIZE":               {"5", map[string]string{"redis-persecond-pool-size": "5"}, ""},
		"REDIS_PERSECOND_AUTH":                    {"pw2", map[string]string{"redis-persecond-auth": "pw2"}, ""},
		"REDIS_PERSECOND_TLS":                     {"true", map[string]string{"redis-persecond-tls": "true"}, ""},
		"REDIS_SENTINEL_AUTH":                     {"spw", map[string]string{"redis-sentinel-auth": "spw"}, ""},
		"REDIS_PERSECOND_SENTINEL_AUTH":           {"spw2", map[string]string{"redis-persecond-sentinel-auth": "spw2"}, ""},
		"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION":    {"true", map[string]string{}, ""},
		"REDIS_TIMEOUT":                           {"2s", map[string]string{"redis-timeout": "2s"}, ""},
		"REDIS_PERSECOND_TIMEOUT":                 {"3s", map[string]string{"redis-persecond-timeout": "3s"}, ""},
		"REDIS_POOL_ON_EMPTY_BEHAVIOR":            {"CREATE", nil, `REDIS_POOL_ON_EMPTY_BEHAVIOR="CREATE": want WAIT`},
		"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR":  {"ERROR", nil, `REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR="ERROR": want WAIT`},
		"SHADOW_MODE":                             {"true", map[string]string{"shadow-mode": "true"}, ""},
		"QUOTA_MODE":                              {"true", nil, "QUOTA_MODE=true: not supported"},
		"RESPONSE_DYNAMIC_METADATA":               {"true", nil, "RESPONSE_DYNAMIC_METADATA=true: not supported"},
		"MERGE_DOMAIN_CONFIG":                     {"true", map[string]string{"merge-domains": "true"}, ""},
		"TRACING_ENABLED":                         {"true", map[string]string{"tracing": "true"}, ""},
		"TRACING_SERVICE_NAME":                    {"rl", map[string]string{"tracing-service-name": "rl"}, ""},
		"TRACING_SERVICE_NAMESPACE":               {"ns", map[string]string{"tracing-service-namespace": "ns"}, ""},
		"TRACING_SERVICE_INSTANCE_ID":             {"i-1", map[string]string{"tracing-instance-id": "i-1"}, ""},
		"TRACING_EXPORTER_PROTOCOL":               {"grpc", map[string]string{"tracing-protocol": "grpc"}, ""},
		"TRACING_SAMPLING_RATE":                   {"0.25", map[string]string{"tracing-sampling-rate": "0.25"}, ""},
	}
	// The variables of the xDS source: their flag, once it is there.
	xds := map[string][2]string{
		"CONFIG_TYPE": {"GRPC_XDS_SOTW", "config-type"}, "FORCE_START_WITHOUT_INITIAL_CONFIG": {"true", "force-start-without-initial-config"},
		"CONFIG_GRPC_XDS_NODE_ID": {"n1", "xds-node-id"}, "CONFIG_GRPC_XDS_NODE_METADATA": {"a:b", "xds-node-metadata"},
		"CONFIG_GRPC_XDS_SERVER_URL": {"xds:18000", "xds-server"}, "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": {"5s", "xds-retry-interval"},
		"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": {"a:b", "xds-headers"}, "CONFIG_GRPC_XDS_SERVER_USE_TLS": {"true", "xds-tls"},
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT": {cert, "xds-tls-cert"}, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": {key, "xds-tls-key"},
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": {cert, "xds-tls-ca"}, "CONFIG_GRPC_XDS_SERVER_TLS_SAN": {"xds.example", "xds-tls-san"},
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": {"1s", "xds-backoff-initial"}, "XDS_CLIENT_BACKOFF_MAX_INTERVAL": {"9s", "xds-backoff-max"},
		"XDS_CLIENT_BACKOFF_RANDOM_FACTOR": {"0.2", "xds-backoff-random-factor"}, "XDS_CLIENT_BACKOFF_JITTER": {"false", "xds-backoff-jitter"},
		"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": {"1048576", "xds-max-msg-bytes"},
	}
	for _, v := range envTable {
		t.Run(v.name, func(t *testing.T) {
			if x, ok := xds[v.name]; ok {
				require.Equal(t, []string{x[1]}, v.flags)
				_, values, err := parseEnv(t, map[string]string{v.name: x[0]})
				require.NoError(t, err)
				want := x[0]
				if v.name == "CONFIG_TYPE" { // the flag's own spelling of the same value
					want = strings.ToLower(strings.ReplaceAll(want, "_", "-"))
				}
				assert.Equal(t, want, values[x[1]])
				return
			}
			if v.status == envIgnored {
				require.NotContains(t, cases, v.name, "an ignored variable has no case")
				value := map[envKind]string{envBool: "true", envInt: "7", envDuration: "7s", envFloat: "0.7", envString: "x"}[v.kind]
				f, values, err := parseEnv(t, map[string]string{v.name: value})
				require.NoError(t, err)
				for name, want := range envoyDefaults {
					assert.Equal(t, want, values[name], "-%s", name)
				}
				assert.Equal(t, []string{v.name + ": " + v.note}, f.compat.ignored)
				return
			}
			c, ok := cases[v.name]
			require.True(t, ok, "%s has no case", v.name)
			switch v.name { // what needs a companion variable to be read
			case "PROMETHEUS_ADDR", "PROMETHEUS_PATH":
				_, values, err := parseEnv(t, map[string]string{v.name: c.value})
				require.NoError(t, err)
				assert.Equal(t, "", values["metrics-addr"], "read only with USE_PROMETHEUS=true")
				_, values, err = parseEnv(t, map[string]string{"USE_PROMETHEUS": "true", v.name: c.value})
				require.NoError(t, err)
				for fl, want := range c.flags {
					assert.Equal(t, want, values[fl])
				}
				return
			case "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN":
				env := map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": cert, "GRPC_SERVER_TLS_KEY": key,
					"GRPC_CLIENT_TLS_CACERT": cert, v.name: c.value}
				_, values, err := parseEnv(t, env)
				require.NoError(t, err)
				assert.Equal(t, map[string]string{"tls-cert": cert, "tls-key": key, "tls-http": "false", "tls-client-ca": cert},
					map[string]string{"tls-cert": values["tls-cert"], "tls-key": values["tls-key"], "tls-http": values["tls-http"], "tls-client-ca": values["tls-client-ca"]})
				if v.name == "GRPC_CLIENT_TLS_SAN" {
					assert.Equal(t, c.value, values["tls-client-san"])
				}
				return
			}
			_, values, err := parseEnv(t, map[string]string{v.name: c.value})
			if c.err != "" && c.flags == nil {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			if c.err != "" { // a flag whose companion the check wants: it was set all the same
				require.ErrorContains(t, err, c.err)
			} else {
				require.NoError(t, err)
			}
			want := map[string]string{}
			for k, v := range envoyDefaults {
				want[k] = v
			}
			for k, v := range c.flags {
				want[k] = v
			}
			got := map[string]string{}
			for k := range want {
				got[k] = values[k]
			}
			assert.Equal(t, want, got)
			for _, fl := range v.flags {
				if _, ok := c.flags[fl]; !ok && v.name != "GRPC_SERVER_TLS_CERT" && v.name != "GRPC_SERVER_TLS_KEY" {
					t.Errorf("the case of %s does not check its flag -%s", v.name, fl)
				}
			}
		})
	}
}

// TestEnvNone: without envoy ratelimit's variables, actorlimitd's own
// defaults stand (loopback, -config required).
func TestEnvNone(t *testing.T) {
	_, _, err := parseEnv(t, map[string]string{"OTEL_SERVICE_NAME": "x", "HOSTNAME": "h"})
	require.ErrorContains(t, err, "-config is required")
	f, values, err := parseEnv(t, nil, "-config", "x.yaml")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", values["http-addr"])
	assert.Equal(t, "info", values["log-level"])
	assert.Empty(t, f.compat.envRead)
	assert.False(t, f.compat.secretsOffEnv)
}

// TestEnvBadValue: a value of the wrong kind is an error naming the
// variable, for every variable read as a bool, number or duration.
func TestEnvBadValue(t *testing.T) {
	n := 0
	for _, v := range envTable {
		if v.kind == envString || v.kind == envSpecial {
			continue
		}
		n++
		_, _, err := parseEnv(t, map[string]string{v.name: "bogus"})
		require.Error(t, err, v.name)
		assert.Contains(t, err.Error(), v.name+`="bogus"`)
	}
	assert.Greater(t, n, 40)
	for name, value := range map[string]string{"PORT": "http", "GRPC_PORT": "70000", "DEBUG_PORT": "-1", "LOG_LEVEL": "LOUD", "BACKEND_TYPE": "etcd"} {
		_, _, err := parseEnv(t, map[string]string{name: value})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
}

// TestEnvFlagWins: a flag on the command line wins over its variable, and
// the variable is no error.
func TestEnvFlagWins(t *testing.T) {
	env := map[string]string{"PORT": "9000", "LOG_LEVEL": "DEBUG", "REDIS_URL": "r:1", "SHADOW_MODE": "true", "RUNTIME_ROOT": "/data"}
	f, values, err := parseEnv(t, env, "-http-addr", "127.0.0.1:1", "-log-level", "error", "-redis", "q:2", "-shadow-mode=false", "-config", "c.yaml")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1", values["http-addr"])
	assert.Equal(t, "error", f.logLevel)
	assert.Equal(t, "q:2", f.redis)
	assert.False(t, f.shadowMode)
	assert.Equal(t, "c.yaml", f.config)
	assert.Equal(t, "0.0.0.0:8081", values["grpc-addr"], "what the command line does not give comes from the environment")

	// The secret keys: off with envoy ratelimit's environment alone, as
	// asked for by a flag or actorlimitd's variables otherwise.
	defaultKeys := strings.Join(service.DefaultSecretKeys, ",")
	cases := []struct {
		env     map[string]string
		args    []string
		keys    string
		keyFile string
		off     bool
	}{
		{map[string]string{"PORT": "1"}, nil, "", "", true},
		{map[string]string{"PORT": "1", envSecretKeyFile: "/k"}, nil, defaultKeys, "/k", false},
		{map[string]string{"PORT": "1", envSecretKeys: "api_key"}, nil, "api_key", "", false},
		{map[string]string{"PORT": "1"}, []string{"-secret-key-file", "/f"}, defaultKeys, "/f", false},
		{map[string]string{"PORT": "1", envSecretKeys: "a"}, []string{"-secret-descriptor-keys", "b"}, "b", "", false},
	}
	for _, c := range cases {
		f, _, err := parseEnv(t, c.env, c.args...)
		require.NoError(t, err)
		assert.Equal(t, c.keyFile, f.edge.secretKeyFile, "%v %v", c.env, c.args)
		assert.Equal(t, c.off, f.compat.secretsOffEnv, "%v %v", c.env, c.args)
		assert.Equal(t, c.keys, f.edge.secretKeys, "%v %v", c.env, c.args)
	}
}

// TestEnvHelp: -h names, for each flag, the variables that set it.
func TestEnvHelp(t *testing.T) {
	withEnv(t, nil)
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	help := out.String()
	usage := map[string]string{} // flag -> its usage, as printed
	for _, block := range regexp.MustCompile(`(?m)^  -`).Split(help, -1)[1:] {
		name, rest, _ := strings.Cut(block, " ")
		name, _, _ = strings.Cut(name, "\n")
		usage[name] = rest
	}
	n := 0
	for _, v := range envTable {
		for _, fl := range v.flags {
			n++
			require.Contains(t, usage, fl, "-h lists -%s", fl)
			assert.Regexp(t, `\(env [A-Z_, ]*\b`+v.name+`\b`, usage[fl], "-%s names %s", fl, v.name)
		}
	}
	assert.Greater(t, n, 50)
	assert.Contains(t, usage["http-addr"], "(env HOST, PORT)")
	assert.Contains(t, usage["secret-key-file"], envSecretKeyFile)
}

// TestEnvFlagsExist: every flag the table maps a variable to exists.
func TestEnvFlagsExist(t *testing.T) {
	withEnv(t, nil)
	f, err := parseFlags([]string{"-config", "x"}, io.Discard)
	require.NoError(t, err)
	for _, v := range envTable {
		for _, fl := range v.flags {
			t.Run(v.name+"/"+fl, func(t *testing.T) {
				assert.NotNil(t, f.compat.fs.Lookup(fl), "%s maps to -%s", v.name, fl)
			})
		}
		switch {
		case v.status == envIgnored:
			assert.Empty(t, v.flags, "%s is ignored", v.name)
			assert.NotEmpty(t, v.note, "%s: ignored, why", v.name)
		case v.status == envDiffers:
			assert.NotEmpty(t, v.note, "%s: differs, how", v.name)
		}
	}
}

// envoySettings returns the envconfig names of envoy ratelimit's settings
// file, with their defaults, in the file's order: the module is downloaded
// (in CI, where it must be; elsewhere the test is skipped without it).
func envoySettings(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", envoyRatelimit).Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("go mod download %s: %v %s", envoyRatelimit, err, mod.Error)
		}
		t.Skipf("envoy ratelimit's module is not at hand (go mod download %s: %v %s)", envoyRatelimit, err, mod.Error)
	}
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(mod.Dir, "src/settings/settings.go"), nil, 0)
	require.NoError(t, err)
	var names []string
	defaults := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		f, ok := n.(*ast.Field)
		if !ok || f.Tag == nil {
			return true
		}
		tag, err := strconv.Unquote(f.Tag.Value)
		require.NoError(t, err)
		if name := reflect.StructTag(tag).Get("envconfig"); name != "" {
			names = append(names, name)
			defaults[name] = reflect.StructTag(tag).Get("default")
		}
		return true
	})
	return names, defaults
}

// TestEnvTableFollowsEnvoySettings: every variable of envoy ratelimit's
// settings has a row in env.go's table, with envoy ratelimit's default, and
// a row in docs/service.md's table; neither has a row of its own.
func TestEnvTableFollowsEnvoySettings(t *testing.T) {
	names, defaults := envoySettings(t)
	require.Len(t, names, 108, "envoy ratelimit's settings at the pinned version")
	rows := map[string]envVar{}
	for _, v := range envTable {
		_, dup := rows[v.name]
		require.False(t, dup, "%s has two rows", v.name)
		rows[v.name] = v
	}
	doc, err := os.ReadFile("../../docs/service.md")
	require.NoError(t, err)
	docRows := map[string]string{} // variable -> its status in the docs
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|[^|]*\\| ([a-z']+) \\|").FindAllStringSubmatch(string(doc), -1) {
		docRows[m[1]] = m[2]
	}
	for _, name := range names {
		v, ok := rows[name]
		if assert.True(t, ok, "env.go's table has no row for %s", name) {
			assert.Equal(t, defaults[name], v.def, "%s's default", name)
			assert.Equal(t, v.status.String(), docRows[name], "docs/service.md's row for %s, and what it says of it", name)
		}
		delete(rows, name)
		delete(docRows, name)
	}
	assert.Empty(t, rows, "env.go's rows that envoy ratelimit does not have")
	delete(docRows, envSecretKeyFile)
	delete(docRows, envSecretKeys)
	delete(docRows, envWindowKeys)
	delete(docRows, envBusyPoll)
	delete(docRows, envTransport)
	assert.Empty(t, docRows, "docs/service.md's rows that envoy ratelimit does not have")
}

// TestEnvTogether: variables read together.
func TestEnvTogether(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want map[string]string
	}{
		{map[string]string{"REDIS_URL": "r:1", envWindowKeys: "true"}, map[string]string{"redis-window-keys": "true"}},
		{map[string]string{"REDIS_URL": "r:1"}, map[string]string{"redis-window-keys": "false", "grpc-transport": "grpc"}},
		{map[string]string{"REDIS_URL": "r:1", envTransport: "direct"}, map[string]string{"grpc-transport": "direct"}},
		{map[string]string{"REDIS_URL": "r:1", "REDIS_PERSECOND": "true"},
			map[string]string{"redis-persecond": "true", "redis-persecond-url": "/var/run/nutcracker/ratelimitpersecond.sock"}},
		{map[string]string{"REDIS_URL": "r:1", "REDIS_PERSECOND": "true", "REDIS_PERSECOND_URL": "r:2"},
			map[string]string{"redis-persecond": "true", "redis-persecond-url": "r:2"}},
		{map[string]string{"HOST": "127.0.0.1", "PORT": "1", "GRPC_UDS": "/s", "GRPC_PORT": "2"},
			map[string]string{"http-addr": "127.0.0.1:1", "grpc-addr": "unix:/s"}},
		{map[string]string{"RUNTIME_ROOT": "/r", "RUNTIME_SUBDIRECTORY": "s", "RUNTIME_APPDIRECTORY": "a"},
			map[string]string{"config": "/r/s/a"}},
		{map[string]string{"LOG_LEVEL": "warning", "LOG_FORMAT": "JSON"}, map[string]string{"log-level": "warn", "log-format": "json"}},
		{map[string]string{"LOG_LEVEL": "Trace", "LOG_FORMAT": "logfmt"}, map[string]string{"log-level": "debug", "log-format": "text"}},
		{map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "0"}, map[string]string{"redis-denied-cache": "0s"}},
	}
	for _, c := range cases {
		_, values, err := parseEnv(t, c.env)
		require.NoError(t, err, "%v", c.env)
		for fl, want := range c.want {
			assert.Equal(t, want, values[fl], "%v: -%s", c.env, fl)
		}
	}
}

// TestEnvXDSWithoutRuntimeDir: with CONFIG_TYPE=GRPC_XDS_SOTW, the runtime
// directory of envoy ratelimit's defaults need not exist (with xDS it holds
// only rate_limit_quota sections): -config is left empty then, so the start
// does not fail on it; one that exists, or -config given, is kept.
func TestEnvXDSWithoutRuntimeDir(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"the default directory, absent", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "RUNTIME_ROOT": filepath.Join(dir, "absent")}, nil, ""},
		{"a directory that exists", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "RUNTIME_ROOT": dir, "RUNTIME_APPDIRECTORY": "."}, nil, dir},
		{"-config given", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}, []string{"-config", filepath.Join(dir, "given")}, filepath.Join(dir, "given")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _, err := parseEnv(t, tt.env, tt.args...)
			require.NoError(t, err)
			got := f.config
			if got != "" {
				got = filepath.Clean(got)
			}
			assert.Equal(t, tt.want, got, "-config")
		})
	}
}
