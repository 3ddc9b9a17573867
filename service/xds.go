package service

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

// XDSTypeURL is the type URL of the resource an xDS server publishes
// envoy ratelimit's configuration as: one RateLimitConfig per domain.
const XDSTypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// XDSOptions say how an XDS client reaches its server.
type XDSOptions struct {
	// Target is the xDS server's address, host:port (a gRPC target).
	Target string
	// NodeID and NodeMetadata name this client to the server.
	NodeID       string
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata on each stream.
	Headers map[string]string
	// Credentials secure the connection (nil: plaintext).
	Credentials credentials.TransportCredentials
	// RetryInterval is how long the connection waits between attempts
	// to reach a server that does not answer (0: 3 s), randomized by
	// half of it either way.
	RetryInterval time.Duration
	// MaxMsgBytes bounds a response (0: gRPC's default, 4 MiB).
	MaxMsgBytes int
	// Backoff is the wait before a new stream once one has ended.
	Backoff XDSBackoff
}

// XDSBackoff is the wait before each new stream to the xDS server after
// one ended: Initial, doubled for each stream in a row that ended
// without a response, up to Max; with Jitter, each wait is randomized by
// RandomFactor of it either way. NewXDS takes an Initial of 0 for 1 s, and
// a Max below Initial for Initial.
type XDSBackoff struct {
	Initial, Max time.Duration
	RandomFactor float64
	Jitter       bool
}

// delay returns the wait before attempt n (0 first).
func (b XDSBackoff) delay(n int, rnd func() float64) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter && b.RandomFactor > 0 {
		d = time.Duration(float64(d) * (1 + b.RandomFactor*(2*rnd()-1)))
	}
	return max(d, 0)
}

// XDS keeps a Server's configuration as an xDS server publishes it, in
// state of the world over the aggregated discovery service: each response
// holds every RateLimitConfig, and is put in force whole if it loads
// (ACK), or refused (NACK, with the reason) while the configuration in
// force stays. When the stream ends it opens another after the backoff,
// keeping the configuration in force meanwhile. It is safe for
// concurrent use.
type XDS struct {
	o       XDSOptions
	srv     *Server
	metrics *Metrics
	log     *slog.Logger

	loaded     chan struct{}
	loadedOnce sync.Once

	mu      sync.Mutex
	version string // the version in force, sent again on a new stream
}

// NewXDS returns an XDS client that puts the configurations it receives
// in srv; metrics and log may be nil. Run starts it.
func NewXDS(o XDSOptions, srv *Server, metrics *Metrics, log *slog.Logger) *XDS {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 3 * time.Second
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff.Initial = time.Second
	}
	if o.Backoff.Max < o.Backoff.Initial {
		o.Backoff.Max = o.Backoff.Initial
	}
	return &XDS{o: o, srv: srv, metrics: metrics, log: log, loaded: make(chan struct{})}
}

// Loaded is closed once a first configuration from the server is in
// force.
func (x *XDS) Loaded() <-chan struct{} { return x.loaded }

// Version returns the version of the configuration in force ("" before
// the first).
func (x *XDS) Version() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.version
}

// Run talks to the server until ctx ends: it opens a stream, asks for
// the RateLimitConfig resources, and answers each response; when the
// stream ends, or cannot be opened, it waits the backoff and opens another.
// It keeps one connection, which gRPC makes again every RetryInterval
// while the server cannot be reached.
func (x *XDS) Run(ctx context.Context) {
	opts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: x.o.RetryInterval, Multiplier: 1, Jitter: 0.5, MaxDelay: x.o.RetryInterval},
			MinConnectTimeout: max(x.o.RetryInterval, time.Second),
		}),
	}
	if x.o.Credentials != nil {
		opts = append(opts, grpc.WithTransportCredentials(x.o.Credentials))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if x.o.MaxMsgBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(x.o.MaxMsgBytes)))
	}
	conn, err := grpc.NewClient(x.o.Target, opts...)
	if err != nil {
		x.log.Error("xDS client not started: no configuration will come", "server", x.o.Target, "err", err)
		return
	}
	defer conn.Close()
	fails := 0
	for {
		got, err := x.stream(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		if got {
			fails = 0
		}
		d := x.o.Backoff.delay(fails, rand.Float64)
		fails++
		x.log.Warn("xDS stream ended; the configuration in force, if any, stays", "server", x.o.Target, "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// stream runs one stream on conn until it ends; got says whether a
// response came. It fails at once when conn cannot reach the server (so
// that the reason is logged), and conn itself tries to reconnect every
// RetryInterval.
func (x *XDS) stream(ctx context.Context, conn *grpc.ClientConn) (got bool, err error) {
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, metadata.New(x.o.Headers)))
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	node := x.node()
	// A new stream says which version it has, so that a server that still
	// publishes it need not send it again.
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: XDSTypeURL, VersionInfo: x.Version()}); err != nil {
		return false, err
	}
	x.log.Info("xDS request sent", "server", x.o.Target, "node", x.o.NodeID)
	for {
		resp, err := s.Recv()
		if err != nil {
			return got, err
		}
		got = true
		// The answer is of the response's type: a response of another is
		// refused, in its own type.
		req := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
		if err := x.apply(resp); err != nil {
			x.log.Error("xDS configuration refused (NACK); the one in force stays", "version", resp.GetVersionInfo(), "err", err)
			req.VersionInfo = x.Version()
			req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		} else {
			req.VersionInfo = resp.GetVersionInfo()
		}
		if err := s.Send(req); err != nil {
			return got, err
		}
	}
}

// apply loads resp's configuration and puts it in force, or returns why
// not.
func (x *XDS) apply(resp *discoveryv3.DiscoveryResponse) error {
	var c *Config
	err := error(nil)
	if resp.GetTypeUrl() != XDSTypeURL {
		err = fmt.Errorf("%w: response of type %q, want %q", ErrConfig, resp.GetTypeUrl(), XDSTypeURL)
	} else {
		c, err = ParseXDS(resp.GetResources())
	}
	if err == nil {
		err = x.srv.CheckConfig(c)
	}
	x.metrics.ConfigLoaded(c, err)
	if err != nil {
		return err
	}
	x.srv.SetConfig(c)
	x.mu.Lock()
	x.version = resp.GetVersionInfo()
	x.mu.Unlock()
	x.loadedOnce.Do(func() { close(x.loaded) })
	x.log.Info("configuration loaded from xDS", "version", resp.GetVersionInfo(), "domains", len(c.domains), "rules", c.Rules())
	return nil
}

// node is what the client says of itself to the server.
func (x *XDS) node() *corev3.Node {
	n := &corev3.Node{Id: x.o.NodeID, UserAgentName: "actorlimitd"}
	if len(x.o.NodeMetadata) > 0 {
		fields := make(map[string]*structpb.Value, len(x.o.NodeMetadata))
		for k, v := range x.o.NodeMetadata {
			fields[k] = structpb.NewStringValue(v)
		}
		n.Metadata = &structpb.Struct{Fields: fields}
	}
	return n
}

// ParseXDS reads a configuration from RateLimitConfig resources, as
// though each were a file named "xds:" and the resource's name (in
// errors and /rlconfig), in name order: the same rules hold as for files
// (a domain in two resources is an error).
func ParseXDS(resources []*anypb.Any) (*Config, error) {
	files := make(map[string][]byte, len(resources))
	for i, a := range resources {
		var rc rlconfv3.RateLimitConfig
		if err := a.UnmarshalTo(&rc); err != nil {
			return nil, fmt.Errorf("%w: resource %d of type %q: %v", ErrConfig, i, a.GetTypeUrl(), err)
		}
		name := "xds:" + rc.GetName()
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("%w: two resources named %q", ErrConfig, rc.GetName())
		}
		text, err := yaml.Marshal(xdsFile(&rc))
		if err != nil {
			return nil, fmt.Errorf("%w: resource %q: %v", ErrConfig, rc.GetName(), err)
		}
		files[name] = text
	}
	if len(files) == 0 {
		return newConfig(), nil
	}
	return Parse(files)
}

// The YAML forms of a RateLimitConfig: the file a resource stands for.
type (
	yamlFile struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors,omitempty"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value,omitempty"`
		RateLimit      *yamlRateLimit   `yaml:"rate_limit,omitempty"`
		Descriptors    []yamlDescriptor `yaml:"descriptors,omitempty"`
		ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
		DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	}
	yamlRateLimit struct {
		Name            string        `yaml:"name,omitempty"`
		Replaces        []yamlReplace `yaml:"replaces,omitempty"`
		Unit            string        `yaml:"unit,omitempty"`
		RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
		Unlimited       bool          `yaml:"unlimited,omitempty"`
	}
	yamlReplace struct {
		Name string `yaml:"name"`
	}
)

func xdsFile(rc *rlconfv3.RateLimitConfig) yamlFile {
	return yamlFile{Domain: rc.GetDomain(), Descriptors: xdsDescriptors(rc.GetDescriptors())}
}

func xdsDescriptors(ds []*rlconfv3.RateLimitDescriptor) []yamlDescriptor {
	if len(ds) == 0 {
		return nil
	}
	out := make([]yamlDescriptor, len(ds))
	for i, d := range ds {
		out[i] = yamlDescriptor{Key: d.GetKey(), Value: d.GetValue(), Descriptors: xdsDescriptors(d.GetDescriptors()),
			ShadowMode: d.GetShadowMode(), DetailedMetric: d.GetDetailedMetric()}
		p := d.GetRateLimit()
		if p == nil {
			continue
		}
		rl := &yamlRateLimit{Name: p.GetName(), Unlimited: p.GetUnlimited()}
		// UNKNOWN is no unit: right for an unlimited rule, an error for
		// another, as in a file.
		if p.GetUnit() != rlconfv3.RateLimitUnit_UNKNOWN {
			rl.Unit = strings.ToLower(p.GetUnit().String())
		}
		if !p.GetUnlimited() {
			n := p.GetRequestsPerUnit()
			rl.RequestsPerUnit = &n
		}
		for _, r := range p.GetReplaces() {
			rl.Replaces = append(rl.Replaces, yamlReplace{Name: r.GetName()})
		}
		out[i].RateLimit = rl
	}
	return out
}

// ParseKeyValues reads "k1=v1,k2:v2" (the form of envoy ratelimit's
// CONFIG_GRPC_XDS_NODE_METADATA and CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS):
// pairs separated by commas, each split at its first sep (any of seps).
// Empty items are skipped; an item without a separator is an error.
func ParseKeyValues(s, seps string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		i := strings.IndexAny(item, seps)
		if i <= 0 {
			return nil, fmt.Errorf("%q is not key%svalue", item, seps[:1])
		}
		out[strings.TrimSpace(item[:i])] = strings.TrimSpace(item[i+1:])
	}
	return out, nil
}
