package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/keepalive"
)

// envoy ratelimit is set up by environment variables; actorlimitd reads the
// same ones, so that a Deployment written for envoy ratelimit runs
// actorlimitd by changing its image. envTable says what becomes of each:
// honoured (it sets an actorlimitd flag of the same meaning), differs (it
// does, with a difference its note states) or ignored (it means nothing
// here; accepted, and logged once at start with its note). A flag given on
// the command line wins over its variable. docs/service.md's "Moving from
// envoy ratelimit" lists the same table, and a test holds both to envoy
// ratelimit's settings file.

// envStatus is what actorlimitd makes of one of envoy ratelimit's variables.
type envStatus int

const (
	// envHonoured: the variable sets its flags, with envoy ratelimit's
	// meaning.
	envHonoured envStatus = iota
	// envDiffers: the variable is read, with the difference in its note.
	envDiffers
	// envIgnored: the variable means nothing here; it is logged at start.
	envIgnored
)

func (s envStatus) String() string {
	return [...]string{"honoured", "differs", "ignored"}[s]
}

// envKind is how a variable's value is read (as envoy ratelimit's envconfig
// reads it): a value of the wrong kind is an error naming the variable.
type envKind int

const (
	envString envKind = iota
	envBool
	envInt
	envDuration
	envFloat
	envSpecial // read by the code of apply, by its name
)

// envVar is one of envoy ratelimit's variables.
type envVar struct {
	name   string
	status envStatus
	kind   envKind
	flags  []string // the flags it sets; none for an ignored one
	def    string   // envoy ratelimit's default, as it writes it
	note   string   // for differs, how; for ignored, why
}

// Notes shared by several rows.
const (
	noteStatsd   = "statsd is not spoken: the metrics are Prometheus's, on the debug listener's /metrics"
	notePipeline = "go-redis sends each batch's commands in one round trip itself"
	noteMemcache = "memcached is not a backend here (BACKEND_TYPE=memcache is refused)"
	noteXDS      = "the xDS configuration source, with envoy ratelimit's meaning"
)

// envTable is every variable of envoy ratelimit's settings, in its file's
// order.
var envTable = []envVar{
	{name: "HOST", status: envHonoured, kind: envSpecial, flags: []string{"http-addr"}, def: "0.0.0.0"},
	{name: "PORT", status: envHonoured, kind: envSpecial, flags: []string{"http-addr"}, def: "8080"},
	{name: "DEBUG_HOST", status: envHonoured, kind: envSpecial, flags: []string{"debug-addr"}, def: "0.0.0.0"},
	{name: "DEBUG_PORT", status: envDiffers, kind: envSpecial, flags: []string{"debug-addr"}, def: "6070",
		note: "the debug listener serves /metrics, /rlconfig and Go's /debug/pprof/ (not envoy ratelimit's /stats or runtime pages)"},
	{name: "GRPC_UDS", status: envHonoured, kind: envSpecial, flags: []string{"grpc-addr"},
		note: "gRPC on this unix socket instead of GRPC_HOST:GRPC_PORT (-grpc-addr unix:PATH)"},
	{name: "GRPC_HOST", status: envHonoured, kind: envSpecial, flags: []string{"grpc-addr"}, def: "0.0.0.0"},
	{name: "GRPC_PORT", status: envHonoured, kind: envSpecial, flags: []string{"grpc-addr"}, def: "8081"},
	{name: "GRPC_MAX_CONNECTION_AGE", status: envHonoured, kind: envDuration, flags: []string{"grpc-max-connection-age"}, def: "24h"},
	{name: "GRPC_MAX_CONNECTION_AGE_GRACE", status: envHonoured, kind: envDuration, flags: []string{"grpc-max-connection-age-grace"}, def: "1h"},
	{name: "GRPC_SERVER_USE_TLS", status: envHonoured, kind: envSpecial, flags: []string{"tls-cert", "tls-key", "tls-http"}, def: "false",
		note: "true: TLS on gRPC only (-tls-http=false); the certificate is read again when its files change"},
	{name: "GRPC_SERVER_TLS_CERT", status: envHonoured, kind: envSpecial, flags: []string{"tls-cert"}, note: "read with GRPC_SERVER_USE_TLS=true"},
	{name: "GRPC_SERVER_TLS_KEY", status: envHonoured, kind: envSpecial, flags: []string{"tls-key"}, note: "read with GRPC_SERVER_USE_TLS=true"},
	{name: "GRPC_CLIENT_TLS_CACERT", status: envHonoured, kind: envSpecial, flags: []string{"tls-client-ca"}, note: "read with GRPC_SERVER_USE_TLS=true"},
	{name: "GRPC_CLIENT_TLS_SAN", status: envHonoured, kind: envSpecial, flags: []string{"tls-client-san"}, note: "read with GRPC_SERVER_USE_TLS=true: the client certificate must hold this DNS name"},
	{name: "LOG_LEVEL", status: envHonoured, kind: envSpecial, flags: []string{"log-level"}, def: "WARN",
		note: "TRACE and DEBUG are debug, WARNING is warn, FATAL and PANIC are error; case ignored"},
	{name: "LOG_FORMAT", status: envHonoured, kind: envSpecial, flags: []string{"log-format"}, def: "text"},
	{name: "CONFIG_TYPE", status: envHonoured, kind: envString, flags: []string{"config-type"}, def: "FILE", note: noteXDS},
	{name: "FORCE_START_WITHOUT_INITIAL_CONFIG", status: envHonoured, kind: envBool, flags: []string{"force-start-without-initial-config"}, def: "false", note: noteXDS},
	{name: "CONFIG_GRPC_XDS_NODE_ID", status: envHonoured, kind: envString, flags: []string{"xds-node-id"}, def: "default", note: noteXDS},
	{name: "CONFIG_GRPC_XDS_NODE_METADATA", status: envHonoured, kind: envString, flags: []string{"xds-node-metadata"}, note: noteXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_URL", status: envHonoured, kind: envString, flags: []string{"xds-server"}, def: "localhost:18000", note: noteXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", status: envHonoured, kind: envDuration, flags: []string{"xds-retry-interval"}, def: "3s", note: noteXDS},
	{name: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", status: envHonoured, kind: envString, flags: []string{"xds-headers"}, note: noteXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_USE_TLS", status: envHonoured, kind: envBool, flags: []string{"xds-tls"}, def: "false", note: noteXDS},
	{name: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", status: envHonoured, kind: envString, flags: []string{"xds-tls-cert"}, note: noteXDS},
	{name: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", status: envHonoured, kind: envString, flags: []string{"xds-tls-key"}, note: noteXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", status: envHonoured, kind: envString, flags: []string{"xds-tls-ca"}, note: noteXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", status: envHonoured, kind: envString, flags: []string{"xds-tls-san"}, note: noteXDS},
	{name: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", status: envHonoured, kind: envDuration, flags: []string{"xds-backoff-initial"}, def: "10s", note: noteXDS},
	{name: "XDS_CLIENT_BACKOFF_MAX_INTERVAL", status: envHonoured, kind: envDuration, flags: []string{"xds-backoff-max"}, def: "60s", note: noteXDS},
	{name: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", status: envHonoured, kind: envFloat, flags: []string{"xds-backoff-random-factor"}, def: "0.5", note: noteXDS},
	{name: "XDS_CLIENT_BACKOFF_JITTER", status: envHonoured, kind: envBool, flags: []string{"xds-backoff-jitter"}, def: "true", note: noteXDS},
	{name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", status: envHonoured, kind: envInt, flags: []string{"xds-max-msg-bytes"}, note: noteXDS},
	{name: "USE_DOG_STATSD", status: envIgnored, kind: envBool, def: "false", note: noteStatsd},
	{name: "USE_DOG_STATSD_MOGRIFIERS", status: envIgnored, kind: envString, note: noteStatsd},
	{name: "USE_STATSD", status: envIgnored, kind: envBool, def: "true", note: noteStatsd},
	{name: "STATSD_HOST", status: envIgnored, kind: envString, def: "localhost", note: noteStatsd},
	{name: "STATSD_PORT", status: envIgnored, kind: envInt, def: "8125", note: noteStatsd},
	{name: "EXTRA_TAGS", status: envIgnored, kind: envString, note: noteStatsd},
	{name: "STATS_FLUSH_INTERVAL", status: envIgnored, kind: envDuration, def: "10s", note: "Prometheus reads the metrics when it scrapes"},
	{name: "DISABLE_STATS", status: envIgnored, kind: envBool, def: "false", note: "the metrics cost nothing until scraped; -debug-addr '' turns /metrics off"},
	{name: "USE_PROMETHEUS", status: envDiffers, kind: envSpecial, flags: []string{"metrics-addr"}, def: "false",
		note: "true: the metrics on PROMETHEUS_ADDR too (they are always on the debug listener's /metrics), with actorlimitd's names"},
	{name: "PROMETHEUS_ADDR", status: envHonoured, kind: envSpecial, flags: []string{"metrics-addr"}, def: ":9090", note: "read with USE_PROMETHEUS=true"},
	{name: "PROMETHEUS_PATH", status: envHonoured, kind: envSpecial, flags: []string{"metrics-path"}, def: "/metrics", note: "read with USE_PROMETHEUS=true"},
	{name: "PROMETHEUS_MAPPER_YAML", status: envIgnored, kind: envString, note: "the metrics have Prometheus names of their own, not mapped from statsd's"},
	{name: "RUNTIME_ROOT", status: envHonoured, kind: envSpecial, flags: []string{"config"}, def: "/srv/runtime_data/current",
		note: "-config is RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY"},
	{name: "RUNTIME_SUBDIRECTORY", status: envDiffers, kind: envSpecial, flags: []string{"config"},
		note: "unset, the configuration is RUNTIME_ROOT/RUNTIME_APPDIRECTORY (envoy ratelimit, watching the root, then loads none)"},
	{name: "RUNTIME_APPDIRECTORY", status: envDiffers, kind: envSpecial, flags: []string{"config"}, def: "config",
		note: "the directory's *.yaml and *.yml files are read, not its subdirectories nor other names"},
	{name: "RUNTIME_IGNOREDOTFILES", status: envDiffers, kind: envBool, def: "false",
		note: "names starting with '.' are always skipped (a ConfigMap mount's ..data among them)"},
	{name: "RUNTIME_WATCH_ROOT", status: envHonoured, kind: envBool, def: "true",
		note: "either way the directory is watched through its symlinks: a swap of RUNTIME_ROOT's link, or a file written in it, is seen"},
	{name: "EXPIRATION_JITTER_MAX_SECONDS", status: envIgnored, kind: envInt, def: "300",
		note: "a key's Redis expiry is its window's end, which spreads itself: windows are not aligned across keys"},
	{name: "LOCAL_CACHE_SIZE_IN_BYTES", status: envDiffers, kind: envSpecial, flags: []string{"redis-denied-cache"}, def: "0",
		note: "above 0, a key Redis denied is answered locally until its window ends (-redis-denied-cache 24h), bounded at 100000 keys rather than in bytes"},
	{name: "NEAR_LIMIT_RATIO", status: envHonoured, kind: envFloat, flags: []string{"near-limit-ratio"}, def: "0.8"},
	{name: "CACHE_KEY_PREFIX", status: envDiffers, kind: envString, flags: []string{"redis-key-prefix"},
		note: "the keys after the prefix are actorlimitd's own; unset, the prefix is actorlimitd: (envoy ratelimit's keys and these never meet)"},
	{name: "BACKEND_TYPE", status: envDiffers, kind: envSpecial, def: "redis",
		note: "redis: Redis when REDIS_URL is set, the embedded table otherwise; memcache is refused"},
	{name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", status: envDiffers, kind: envBool, flags: []string{"all-or-nothing"}, def: "false",
		note: "a request that any descriptor denies charges none, decided in the same round trip (envoy ratelimit reads the counts first, then adds)"},
	{name: "LIMIT_RESPONSE_HEADERS_ENABLED", status: envHonoured, kind: envBool, flags: []string{"response-headers"}, def: "false"},
	{name: "LIMIT_LIMIT_HEADER", status: envDiffers, kind: envSpecial, def: "RateLimit-Limit", note: "the name is fixed: another is refused"},
	{name: "LIMIT_REMAINING_HEADER", status: envDiffers, kind: envSpecial, def: "RateLimit-Remaining", note: "the name is fixed: another is refused"},
	{name: "LIMIT_RESET_HEADER", status: envDiffers, kind: envSpecial, def: "RateLimit-Reset", note: "the name is fixed: another is refused"},
	{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", status: envDiffers, kind: envBool, def: "false",
		note: "actorlimitd always starts with a configuration loaded, so /healthcheck is up only once one is"},
	{name: "REDIS_SOCKET_TYPE", status: envDiffers, kind: envString, flags: []string{"redis-socket-type"}, def: "unix",
		note: "unset, a path is a socket and host:port is TCP"},
	{name: "REDIS_TYPE", status: envHonoured, kind: envString, flags: []string{"redis-type"}, def: "SINGLE"},
	{name: "REDIS_URL", status: envDiffers, kind: envString, flags: []string{"redis"}, def: "/var/run/nutcracker/ratelimit.sock",
		note: "unset, no Redis: the embedded table decides (envoy ratelimit would dial its default socket)"},
	{name: "REDIS_POOL_SIZE", status: envHonoured, kind: envInt, flags: []string{"redis-pool-size"}, def: "10"},
	{name: "REDIS_AUTH", status: envHonoured, kind: envString, flags: []string{"redis-auth"}},
	{name: "REDIS_TLS", status: envHonoured, kind: envBool, flags: []string{"redis-tls"}, def: "false"},
	{name: "REDIS_TLS_CLIENT_CERT", status: envHonoured, kind: envString, flags: []string{"redis-tls-cert"}},
	{name: "REDIS_TLS_CLIENT_KEY", status: envHonoured, kind: envString, flags: []string{"redis-tls-key"}},
	{name: "REDIS_TLS_CACERT", status: envHonoured, kind: envString, flags: []string{"redis-tls-ca"}},
	{name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", status: envHonoured, kind: envBool, flags: []string{"redis-tls-skip-hostname-verification"}, def: "false"},
	{name: "REDIS_PIPELINE_WINDOW", status: envIgnored, kind: envDuration, def: "0", note: notePipeline},
	{name: "REDIS_PIPELINE_LIMIT", status: envIgnored, kind: envInt, def: "0", note: notePipeline},
	{name: "REDIS_PERSECOND", status: envHonoured, kind: envBool, flags: []string{"redis-persecond"}, def: "false"},
	{name: "REDIS_PERSECOND_SOCKET_TYPE", status: envDiffers, kind: envString, flags: []string{"redis-persecond-socket-type"}, def: "unix",
		note: "unset, a path is a socket and host:port is TCP"},
	{name: "REDIS_PERSECOND_TYPE", status: envHonoured, kind: envString, flags: []string{"redis-persecond-type"}, def: "SINGLE"},
	{name: "REDIS_PERSECOND_URL", status: envHonoured, kind: envString, flags: []string{"redis-persecond-url"}, def: "/var/run/nutcracker/ratelimitpersecond.sock",
		note: "read with REDIS_PERSECOND=true (unset, its default socket)"},
	{name: "REDIS_PERSECOND_POOL_SIZE", status: envHonoured, kind: envInt, flags: []string{"redis-persecond-pool-size"}, def: "10"},
	{name: "REDIS_PERSECOND_AUTH", status: envHonoured, kind: envString, flags: []string{"redis-persecond-auth"}},
	{name: "REDIS_PERSECOND_TLS", status: envHonoured, kind: envBool, flags: []string{"redis-persecond-tls"}, def: "false"},
	{name: "REDIS_SENTINEL_AUTH", status: envHonoured, kind: envString, flags: []string{"redis-sentinel-auth"}},
	{name: "REDIS_PERSECOND_SENTINEL_AUTH", status: envHonoured, kind: envString, flags: []string{"redis-persecond-sentinel-auth"}},
	{name: "REDIS_PERSECOND_PIPELINE_WINDOW", status: envIgnored, kind: envDuration, def: "0", note: notePipeline},
	{name: "REDIS_PERSECOND_PIPELINE_LIMIT", status: envIgnored, kind: envInt, def: "0", note: notePipeline},
	{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", status: envDiffers, kind: envBool, def: "false",
		note: "/healthcheck stays up while Redis is away: the local fallback decides meanwhile"},
	{name: "REDIS_TIMEOUT", status: envDiffers, kind: envDuration, flags: []string{"redis-timeout"}, def: "10s",
		note: "a round trip's bound, past which the local fallback decides (envoy ratelimit answers an error); unset, 250ms"},
	{name: "REDIS_PERSECOND_TIMEOUT", status: envDiffers, kind: envDuration, flags: []string{"redis-persecond-timeout"}, def: "10s",
		note: "as REDIS_TIMEOUT, for the per-second Redis; unset, REDIS_TIMEOUT's"},
	{name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", status: envHonoured, kind: envSpecial, def: "WAIT",
		note: "WAIT, the only value envoy ratelimit starts with: a round trip waits for a connection within -redis-timeout"},
	{name: "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", status: envHonoured, kind: envSpecial, def: "WAIT",
		note: "as REDIS_POOL_ON_EMPTY_BEHAVIOR"},
	{name: "MEMCACHE_HOST_PORT", status: envIgnored, kind: envString, note: noteMemcache},
	{name: "MEMCACHE_MAX_IDLE_CONNS", status: envIgnored, kind: envInt, def: "2", note: noteMemcache},
	{name: "MEMCACHE_SRV", status: envIgnored, kind: envString, note: noteMemcache},
	{name: "MEMCACHE_SRV_REFRESH", status: envIgnored, kind: envDuration, def: "0", note: noteMemcache},
	{name: "MEMCACHE_TLS", status: envIgnored, kind: envBool, def: "false", note: noteMemcache},
	{name: "MEMCACHE_TLS_CLIENT_CERT", status: envIgnored, kind: envString, note: noteMemcache},
	{name: "MEMCACHE_TLS_CLIENT_KEY", status: envIgnored, kind: envString, note: noteMemcache},
	{name: "MEMCACHE_TLS_CACERT", status: envIgnored, kind: envString, note: noteMemcache},
	{name: "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", status: envIgnored, kind: envBool, def: "false", note: noteMemcache},
	{name: "SHADOW_MODE", status: envHonoured, kind: envBool, flags: []string{"shadow-mode"}, def: "false"},
	{name: "QUOTA_MODE", status: envDiffers, kind: envSpecial, def: "false",
		note: "the rules' quota_mode is honoured; the global QUOTA_MODE=true is refused"},
	{name: "RESPONSE_DYNAMIC_METADATA", status: envDiffers, kind: envSpecial, def: "false",
		note: "responses carry no dynamic metadata: true is refused"},
	{name: "MERGE_DOMAIN_CONFIG", status: envHonoured, kind: envBool, flags: []string{"merge-domains"}, def: "false"},
	{name: "TRACING_ENABLED", status: envHonoured, kind: envBool, flags: []string{"tracing"}, def: "false"},
	{name: "TRACING_SERVICE_NAME", status: envHonoured, kind: envString, flags: []string{"tracing-service-name"}, def: "RateLimit"},
	{name: "TRACING_SERVICE_NAMESPACE", status: envHonoured, kind: envString, flags: []string{"tracing-service-namespace"}},
	{name: "TRACING_SERVICE_INSTANCE_ID", status: envHonoured, kind: envString, flags: []string{"tracing-instance-id"}},
	{name: "TRACING_EXPORTER_PROTOCOL", status: envHonoured, kind: envString, flags: []string{"tracing-protocol"}, def: "http"},
	{name: "TRACING_SAMPLING_RATE", status: envHonoured, kind: envFloat, flags: []string{"tracing-sampling-rate"}, def: "1"},
}

// actorlimitd's own variables, read only with envoy ratelimit's: where the
// secret descriptor keys' HMAC key is, which keys are secret, whether
// fixed windows are a Redis key per window (-redis-window-keys), how long
// a read of a Redis connection polls for its reply (-redis-busy-poll), and
// the gRPC server's transport (-grpc-transport).
const (
	envSecretKeyFile = "ACTORLIMITD_SECRET_KEY_FILE"
	envSecretKeys    = "ACTORLIMITD_SECRET_DESCRIPTOR_KEYS"
	envWindowKeys    = "ACTORLIMITD_REDIS_WINDOW_KEYS"
	envBusyPoll      = "ACTORLIMITD_REDIS_BUSY_POLL"
	envTransport     = "ACTORLIMITD_GRPC_TRANSPORT"
)

// compatFlags are the flags that give envoy ratelimit's settings a flag
// where actorlimitd had none.
type compatFlags struct {
	logFormat     string
	nearLimit     float64
	keyPrefix     string
	maxConnAge    time.Duration
	maxConnGrace  time.Duration
	tlsClientSAN  string
	tlsHTTP       bool
	mergeDomains  bool
	metricsAddr   string
	metricsPath   string
	envRead       []string      // the variables that set something, for the log
	ignored       []string      // the ignored variables set, "NAME: why", for the log
	secretsOffEnv bool          // secret keys off because the process is set up by envoy ratelimit's environment
	fs            *flag.FlagSet // where the flags were registered
}

// register adds the flags to fs.
func (c *compatFlags) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.logFormat, "log-format", "text", "log lines as text or json")
	fs.Float64Var(&c.nearLimit, "near-limit-ratio", 0.8, "the share of a limit past which allowed hits count as near it (actorlimitd_near_limit_total)")
	fs.StringVar(&c.keyPrefix, "redis-key-prefix", "actorlimitd:", "with -redis: the prefix of every Redis key")
	fs.DurationVar(&c.maxConnAge, "grpc-max-connection-age", 0, "a gRPC connection older than this (±10%) is asked to go away (0: never)")
	fs.DurationVar(&c.maxConnGrace, "grpc-max-connection-age-grace", 0, "with -grpc-max-connection-age: how long its calls may then take before it is closed (0: as long as they take)")
	fs.StringVar(&c.tlsClientSAN, "tls-client-san", "", "with -tls-client-ca: the DNS name a client certificate must hold")
	fs.BoolVar(&c.tlsHTTP, "tls-http", true, "with -tls-cert: the HTTP listener is TLS too (false: gRPC only, as envoy ratelimit)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "a listener of its own for the metrics, plain HTTP, beside the debug listener's /metrics (empty: none)")
	fs.StringVar(&c.metricsPath, "metrics-path", "/metrics", "with -metrics-addr: the metrics' path")
	fs.BoolVar(&c.mergeDomains, "merge-domains", false, "a domain may be in several configuration files, their descriptors merged (a descriptor in two is still an error)")
}

// envLookup reads a variable: its value, and whether it is set.
type envLookup func(string) (string, bool)

// envDoc appends to each flag's usage the variables that set it, for -h.
func envDoc(fs *flag.FlagSet) {
	by := map[string][]string{}
	for _, v := range envTable {
		for _, f := range v.flags {
			by[f] = append(by[f], v.name)
		}
	}
	by["secret-key-file"] = append(by["secret-key-file"], envSecretKeyFile)
	by["secret-descriptor-keys"] = append(by["secret-descriptor-keys"], envSecretKeys)
	by["redis-window-keys"] = append(by["redis-window-keys"], envWindowKeys)
	by["redis-busy-poll"] = append(by["redis-busy-poll"], envBusyPoll)
	by["grpc-transport"] = append(by["grpc-transport"], envTransport)
	for name, vars := range by {
		if fl := fs.Lookup(name); fl != nil {
			fl.Usage += " (env " + strings.Join(vars, ", ") + ")"
		}
	}
}

// fromEnv sets, from envoy ratelimit's variables (read with lookup), every
// flag that the command line did not give (given), and records in c what
// to log. With none of envoy ratelimit's variables set it does nothing:
// actorlimitd keeps its own defaults. With one set, envoy ratelimit's
// defaults apply to the others (its addresses and ports, its log level,
// its configuration directory). An unparsable value is an error naming its
// variable.
func (c *compatFlags) fromEnv(fs *flag.FlagSet, given map[string]bool, lookup envLookup) error {
	env := map[string]string{}
	for _, v := range envTable {
		if s, ok := lookup(v.name); ok && s != "" {
			env[v.name] = s
		}
	}
	if len(env) == 0 {
		return nil
	}
	set := func(flagName, value, from string) error {
		if given[flagName] {
			return nil
		}
		fl := fs.Lookup(flagName)
		if fl == nil {
			return fmt.Errorf("%s=%q: not available in this build of actorlimitd", from, value)
		}
		if err := fs.Set(flagName, value); err != nil {
			return fmt.Errorf("%s=%q: %w", from, value, err)
		}
		return nil
	}
	get := func(name string) string {
		if s, ok := env[name]; ok {
			return s
		}
		return envDefault(name)
	}
	for _, v := range envTable {
		s, ok := env[v.name]
		if !ok {
			continue
		}
		c.envRead = append(c.envRead, v.name)
		if err := checkKind(v, s); err != nil {
			return err
		}
		switch {
		case v.status == envIgnored:
			c.ignored = append(c.ignored, v.name+": "+v.note)
			continue
		case v.kind == envSpecial || len(v.flags) == 0:
			continue
		}
		fl := v.flags[0]
		if err := set(fl, s, v.name); err != nil {
			return err
		}
	}

	// The addresses, from envoy ratelimit's hosts and ports.
	for _, a := range []struct{ flag, host, port string }{
		{"http-addr", "HOST", "PORT"}, {"grpc-addr", "GRPC_HOST", "GRPC_PORT"}, {"debug-addr", "DEBUG_HOST", "DEBUG_PORT"},
	} {
		port := get(a.port)
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%s=%q: want a port number, 0 to 65535", a.port, port)
		}
		if err := set(a.flag, net.JoinHostPort(get(a.host), port), a.host+", "+a.port); err != nil {
			return err
		}
	}
	if on, _ := strconv.ParseBool(get("REDIS_PERSECOND")); on && env["REDIS_PERSECOND_URL"] == "" {
		if err := set("redis-persecond-url", envDefault("REDIS_PERSECOND_URL"), "REDIS_PERSECOND"); err != nil {
			return err
		}
	}
	if uds := env["GRPC_UDS"]; uds != "" {
		if err := set("grpc-addr", "unix:"+uds, "GRPC_UDS"); err != nil {
			return err
		}
	}

	level, err := envoyLevel(get("LOG_LEVEL"))
	if err != nil {
		return err
	}
	if err := set("log-level", level, "LOG_LEVEL"); err != nil {
		return err
	}
	switch f := strings.ToLower(get("LOG_FORMAT")); f {
	case "text", "json":
		if err := set("log-format", f, "LOG_FORMAT"); err != nil {
			return err
		}
	default: // envoy ratelimit logs text for anything but json
		if err := set("log-format", "text", "LOG_FORMAT"); err != nil {
			return err
		}
	}
	for _, d := range []string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"} {
		if _, ok := env[d]; !ok {
			if err := set(strings.ToLower(strings.ReplaceAll(d, "_", "-")), get(d), d); err != nil {
				return err
			}
		}
	}

	// The configuration: the directory envoy ratelimit's runtime loader
	// reads its files from.
	if err := set("config", filepath.Join(get("RUNTIME_ROOT"), get("RUNTIME_SUBDIRECTORY"), get("RUNTIME_APPDIRECTORY")), "RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY"); err != nil {
		return err
	}

	if on, _ := strconv.ParseBool(get("GRPC_SERVER_USE_TLS")); on {
		cert, key := env["GRPC_SERVER_TLS_CERT"], env["GRPC_SERVER_TLS_KEY"]
		if cert == "" || key == "" {
			return fmt.Errorf("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
		}
		for _, p := range [][3]string{
			{"tls-cert", cert, "GRPC_SERVER_TLS_CERT"}, {"tls-key", key, "GRPC_SERVER_TLS_KEY"}, {"tls-http", "false", "GRPC_SERVER_USE_TLS"},
			{"tls-client-ca", env["GRPC_CLIENT_TLS_CACERT"], "GRPC_CLIENT_TLS_CACERT"}, {"tls-client-san", env["GRPC_CLIENT_TLS_SAN"], "GRPC_CLIENT_TLS_SAN"},
		} {
			if p[1] == "" {
				continue
			}
			if err := set(p[0], p[1], p[2]); err != nil {
				return err
			}
		}
		if env["GRPC_CLIENT_TLS_SAN"] != "" && env["GRPC_CLIENT_TLS_CACERT"] == "" {
			return fmt.Errorf("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT: client certificates are asked for with it")
		}
	}

	switch b := strings.ToLower(get("BACKEND_TYPE")); b {
	case "redis":
	case "memcache":
		return fmt.Errorf("BACKEND_TYPE=memcache: memcached is not a backend of actorlimitd: leave BACKEND_TYPE unset or redis (Redis with REDIS_URL, the embedded table without)")
	default:
		return fmt.Errorf("BACKEND_TYPE=%q: want redis (memcache is not supported)", get("BACKEND_TYPE"))
	}
	if on, _ := strconv.ParseBool(get("USE_PROMETHEUS")); on {
		if err := set("metrics-addr", get("PROMETHEUS_ADDR"), "PROMETHEUS_ADDR"); err != nil {
			return err
		}
		if err := set("metrics-path", get("PROMETHEUS_PATH"), "PROMETHEUS_PATH"); err != nil {
			return err
		}
	}
	if s, ok := env["LOCAL_CACHE_SIZE_IN_BYTES"]; ok {
		if n, _ := strconv.Atoi(s); n > 0 {
			if err := set("redis-denied-cache", "24h", "LOCAL_CACHE_SIZE_IN_BYTES"); err != nil {
				return err
			}
		}
	}
	for _, p := range []string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR"} {
		if s := get(p); !strings.EqualFold(s, "WAIT") {
			return fmt.Errorf("%s=%q: want WAIT (envoy ratelimit starts with no other)", p, s)
		}
	}
	for _, h := range []string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"} {
		if s, ok := env[h]; ok && s != envDefault(h) {
			return fmt.Errorf("%s=%q: actorlimitd's header is %s, and its name is fixed", h, s, envDefault(h))
		}
	}
	for _, b := range []string{"QUOTA_MODE", "RESPONSE_DYNAMIC_METADATA"} {
		if on, _ := strconv.ParseBool(get(b)); on {
			return fmt.Errorf("%s=true: not supported by actorlimitd (leave it unset or false)", b)
		}
	}

	// Secret descriptor keys: envoy ratelimit keeps every value in clear,
	// and its environment gives no key file; unless asked for (a flag or
	// actorlimitd's own variables), they are off.
	// actorlimitd's own settings for speed, which envoy ratelimit's
	// variables have no word for.
	for _, v := range []struct{ env, flag string }{{envWindowKeys, "redis-window-keys"}, {envBusyPoll, "redis-busy-poll"}, {envTransport, "grpc-transport"}} {
		if s, ok := lookup(v.env); ok && s != "" {
			c.envRead = append(c.envRead, v.env)
			if err := set(v.flag, s, v.env); err != nil {
				return err
			}
		}
	}

	keyFile, _ := lookup(envSecretKeyFile)
	keys, keysSet := lookup(envSecretKeys)
	if keyFile != "" {
		if err := set("secret-key-file", keyFile, envSecretKeyFile); err != nil {
			return err
		}
	}
	if keysSet {
		if err := set("secret-descriptor-keys", keys, envSecretKeys); err != nil {
			return err
		}
	}
	if keyFile == "" && !keysSet && !given["secret-key-file"] && !given["secret-descriptor-keys"] {
		if err := set("secret-descriptor-keys", "", "envoy ratelimit's environment"); err != nil {
			return err
		}
		c.secretsOffEnv = true
	}
	sort.Strings(c.ignored)
	return nil
}

// envDefault is envoy ratelimit's default of the variable name.
func envDefault(name string) string {
	for _, v := range envTable {
		if v.name == name {
			return v.def
		}
	}
	return ""
}

// checkKind refuses a value that envoy ratelimit would not parse as v's
// kind.
func checkKind(v envVar, s string) error {
	var err error
	switch v.kind {
	case envBool:
		_, err = strconv.ParseBool(s)
	case envInt:
		_, err = strconv.ParseInt(s, 0, 64)
	case envDuration:
		_, err = time.ParseDuration(s)
	case envFloat:
		_, err = strconv.ParseFloat(s, 64)
	}
	if err != nil {
		return fmt.Errorf("%s=%q: %w", v.name, s, err)
	}
	return nil
}

// envoyLevel maps envoy ratelimit's LOG_LEVEL (logrus's levels) onto
// -log-level's.
func envoyLevel(s string) (string, error) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return "debug", nil
	case "info":
		return "info", nil
	case "warn", "warning":
		return "warn", nil
	case "error", "fatal", "panic":
		return "error", nil
	}
	return "", fmt.Errorf("LOG_LEVEL=%q: want TRACE, DEBUG, INFO, WARN, ERROR, FATAL or PANIC", s)
}

// lookupEnv reads the process's environment; tests replace it.
var lookupEnv envLookup = os.LookupEnv

// givenFlags returns the names of the flags fs's command line gave.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// logger returns the process's logger at level, in -log-format.
func (c *compatFlags) logger(level string, w io.Writer) *slog.Logger {
	l, _ := parseLevel(level)
	o := &slog.HandlerOptions{Level: l}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// logStart logs, once, what envoy ratelimit's environment did: the
// variables read, each ignored one with why, and the secret keys turned
// off.
func (c *compatFlags) logStart(log *slog.Logger) {
	if len(c.envRead) == 0 {
		return
	}
	log.Info("set up by envoy ratelimit's environment variables; a flag given wins over its variable", "variables", strings.Join(c.envRead, ","))
	for _, ig := range c.ignored {
		name, why, _ := strings.Cut(ig, ": ")
		log.Warn("environment variable ignored", "variable", name, "why", why) // WARN: seen at envoy ratelimit's LOG_LEVEL
	}
	if c.secretsOffEnv {
		log.Warn("secret descriptor keys are off, as envoy ratelimit keeps every value in clear: to keep the values of api_key, authorization... as their HMAC, set " +
			envSecretKeyFile + " to a file of 32 random bytes (the same for every process) or give -secret-key-file; " +
			envSecretKeys + " (or -secret-descriptor-keys) names the keys")
	}
}

// keepalive returns the gRPC server's keepalive parameters p with
// -grpc-max-connection-age and its grace.
func (c *compatFlags) keepalive(p keepalive.ServerParameters) keepalive.ServerParameters {
	p.MaxConnectionAge, p.MaxConnectionAgeGrace = c.maxConnAge, c.maxConnGrace
	return p
}

// requireSAN returns the check that a client's verified certificate holds
// the DNS name san (-tls-client-san, envoy ratelimit's
// GRPC_CLIENT_TLS_SAN); nil when san is empty.
func requireSAN(san string) func([][]byte, [][]*x509.Certificate) error {
	if san == "" {
		return nil
	}
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("no verified client certificate")
		}
		if err := chains[0][0].VerifyHostname(san); err != nil {
			return fmt.Errorf("the client certificate does not hold %q (-tls-client-san): %w", san, err)
		}
		return nil
	}
}

// check refuses compatFlags that cannot work; clientCA is -tls-client-ca.
func (c *compatFlags) check(clientCA string) error {
	switch {
	case c.logFormat != "text" && c.logFormat != "json":
		return fmt.Errorf("-log-format %q: want text or json", c.logFormat)
	case !(c.nearLimit > 0 && c.nearLimit <= 1):
		return fmt.Errorf("-near-limit-ratio %v: want above 0, at most 1", c.nearLimit)
	case c.maxConnAge < 0 || c.maxConnGrace < 0:
		return errors.New("-grpc-max-connection-age and -grpc-max-connection-age-grace must not be negative")
	case !strings.HasPrefix(c.metricsPath, "/"):
		return fmt.Errorf("-metrics-path %q: want a path starting with /", c.metricsPath)
	case c.tlsClientSAN != "" && clientCA == "":
		return errors.New("-tls-client-san needs -tls-client-ca: client certificates are asked for with it")
	}
	return nil
}

// serveMetrics serves reg's metrics on -metrics-addr (envoy ratelimit's
// PROMETHEUS_ADDR), until the returned stop is called; nothing without it.
func (c *compatFlags) serveMetrics(reg *prometheus.Registry, errs chan<- error, log *slog.Logger) (stop func(), err error) {
	if c.metricsAddr == "" {
		return func() {}, nil
	}
	l, err := listen("metrics", c.metricsAddr, log)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+c.metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	log.Info("metrics listener", "addr", l.Addr().String(), "path", c.metricsPath)
	return func() { _ = srv.Close() }, nil
}
