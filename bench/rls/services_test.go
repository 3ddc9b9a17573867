package rls

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// configDir holds envoy ratelimit's configuration files the way it reads
// them: Root/ratelimit/config/*.yaml, with RUNTIME_ROOT=Root and
// RUNTIME_SUBDIRECTORY=ratelimit. actorlimitd reads Files, the same files.
type configDir struct {
	Root  string
	Files string
}

// writeConfig writes each of files (file name to YAML) into a new configDir.
func writeConfig(tb testing.TB, files map[string]string) configDir {
	tb.Helper()
	root := tb.TempDir()
	d := configDir{Root: root, Files: filepath.Join(root, "ratelimit", "config")}
	if err := os.MkdirAll(d.Files, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(d.Files, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// startRedis starts a redis-server for tb (internal/redistest: skipped
// without the program unless CI is set).
func startRedis(tb testing.TB) *redistest.Server {
	tb.Helper()
	return redistest.Start(tb)
}

// envoyOptions are envoy ratelimit's settings beyond the defaults that
// startEnvoy sets.
type envoyOptions struct {
	// LocalCacheBytes turns on its local over-limit cache
	// (LOCAL_CACHE_SIZE_IN_BYTES) when above 0.
	LocalCacheBytes int
	// Env are more settings, NAME=value.
	Env []string
}

// startEnvoy starts envoy ratelimit on cfg and the redis-server at
// redisAddr, on loopback, and returns its gRPC address. Its settings are its
// defaults but for the listeners, Redis over TCP, the configuration's
// directory (not watched at its root) and no statsd sink.
func startEnvoy(tb testing.TB, cfg configDir, redisAddr string, o envoyOptions) string {
	tb.Helper()
	bin := envoyBinary(tb)
	grpcPort, httpPort := freePort(tb), freePort(tb)
	served(addr(grpcPort), start(tb, "envoy ratelimit", bin, nil, envoyEnv(tb, cfg, redisAddr, grpcPort, httpPort, o), httpOK("http://"+addr(httpPort)+"/healthcheck")))
	return addr(grpcPort)
}

// envoyEnv is the environment startEnvoy gives envoy ratelimit.
func envoyEnv(tb testing.TB, cfg configDir, redisAddr string, grpcPort, httpPort int, o envoyOptions) []string {
	env := []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(freePort(tb)),
		"USE_STATSD=false", "LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + cfg.Root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"LOCAL_CACHE_SIZE_IN_BYTES=" + strconv.Itoa(o.LocalCacheBytes),
	}
	return append(env, o.Env...)
}

// startActorlimitdEnv starts cmd/actorlimitd with no flags, set up by the
// environment startEnvoy gives envoy ratelimit (its own Redis at
// redisAddr), and returns its gRPC address: the image swapped, nothing
// else.
func startActorlimitdEnv(tb testing.TB, cfg configDir, redisAddr string, o envoyOptions) string {
	tb.Helper()
	bin := actorlimitdBinary(tb)
	grpcPort, httpPort := freePort(tb), freePort(tb)
	served(addr(grpcPort), start(tb, "actorlimitd", bin, nil, envoyEnv(tb, cfg, redisAddr, grpcPort, httpPort, o), httpOK("http://"+addr(httpPort)+"/healthcheck")))
	return addr(grpcPort)
}

// startActorlimitd starts cmd/actorlimitd on cfg (on the embedded table, or
// on the redis-server at redisAddr when it is not empty, with extra flags)
// and returns its gRPC address.
func startActorlimitd(tb testing.TB, cfg configDir, redisAddr string, extra ...string) string {
	tb.Helper()
	return startActorlimitdEnvFlags(tb, cfg, redisAddr, nil, extra...)
}

// startActorlimitdEnvFlags is startActorlimitd with env (NAME=value) added
// to the program's environment.
func startActorlimitdEnvFlags(tb testing.TB, cfg configDir, redisAddr string, env []string, extra ...string) string {
	tb.Helper()
	bin := actorlimitdBinary(tb)
	grpcPort, httpPort := freePort(tb), freePort(tb)
	// Secret keys off: envoy ratelimit keeps every value as it is.
	args := []string{"-config", cfg.Files, "-grpc-addr", addr(grpcPort), "-http-addr", addr(httpPort), "-debug-addr", "", "-secret-descriptor-keys", ""}
	if redisAddr != "" {
		args = append(args, "-redis", redisAddr)
	}
	args = append(args, extra...)
	served(addr(grpcPort), start(tb, "actorlimitd", bin, args, env, httpOK("http://"+addr(httpPort)+"/healthcheck")))
	return addr(grpcPort)
}

// startFloor starts bench/cmd/rlsfloor with flags and returns its gRPC
// address.
func startFloor(tb testing.TB, flags ...string) string {
	tb.Helper()
	bin := floorBinary(tb)
	a := addr(freePort(tb))
	served(a, start(tb, "rlsfloor", bin, append([]string{"-grpc-addr", a}, flags...), nil, dialOK(a)))
	return a
}

// startGubernator starts one gubernator on loopback (its peer list made of
// itself through memberlist) and returns its gRPC address.
func startGubernator(tb testing.TB) string {
	tb.Helper()
	bin := gubernatorBinary(tb)
	grpcAddr, httpAddr, mlAddr := addr(freePort(tb)), addr(freePort(tb)), addr(freePort(tb))
	env := []string{
		"GUBER_GRPC_ADDRESS=" + grpcAddr, "GUBER_HTTP_ADDRESS=" + httpAddr,
		"GUBER_ADVERTISE_ADDRESS=" + grpcAddr, "GUBER_PEER_DISCOVERY_TYPE=member-list",
		"GUBER_MEMBERLIST_ADDRESS=" + mlAddr, "GUBER_MEMBERLIST_BIND_ADDRESS=" + mlAddr,
		"GUBER_MEMBERLIST_ADVERTISE_ADDRESS=" + grpcAddr, "GUBER_MEMBERLIST_KNOWN_NODES=" + mlAddr,
		"GUBER_LOG_LEVEL=warn",
	}
	start(tb, "gubernator", bin, nil, env, gubernatorReady(grpcAddr))
	return grpcAddr
}
