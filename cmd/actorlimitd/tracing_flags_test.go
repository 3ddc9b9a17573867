package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tracingEnv are the variables TestTracingFlags sets, each case's own or
// empty.
var tracingEnv = []string{"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"}

// TestTracingFlags: the -tracing* flags with envoy ratelimit's defaults,
// the standard OTEL_* variables deciding what no flag gave, a flag given
// winning over them, and a bad value refused naming the flag or variable.
func TestTracingFlags(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		env         map[string]string
		wantErr     string
		on          bool
		protocol    string
		fromEnv     bool   // OTEL_TRACES_SAMPLER decides
		service, ns string // the resource's service.name and service.namespace
	}{
		{name: "defaults", protocol: "http", service: "RateLimit"},
		{name: "on", args: []string{"-tracing", "-tracing-protocol", "grpc", "-tracing-service-name", "rl", "-tracing-service-namespace", "edge"},
			on: true, protocol: "grpc", service: "rl", ns: "edge"},
		{name: "OTEL_TRACES_EXPORTER otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: "http", service: "RateLimit"},
		{name: "OTEL_TRACES_EXPORTER none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, protocol: "http", service: "RateLimit"},
		{name: "-tracing=false wins", args: []string{"-tracing=false"}, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, protocol: "http", service: "RateLimit"},
		{name: "OTEL_SDK_DISABLED", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, protocol: "http", service: "RateLimit"},
		{name: "OTEL_TRACES_EXPORTER unknown", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER "zipkin"`},
		{name: "OTEL_EXPORTER_OTLP_PROTOCOL grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, protocol: "grpc", service: "RateLimit"},
		{name: "traces protocol first", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			protocol: "http", service: "RateLimit"},
		{name: "-tracing-protocol wins", args: []string{"-tracing-protocol", "http"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			protocol: "http", service: "RateLimit"},
		{name: "http/json refused", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL "http/json"`},
		{name: "protocol unknown", args: []string{"-tracing-protocol", "thrift"}, wantErr: `-tracing-protocol "thrift"`},
		{name: "rate NaN", args: []string{"-tracing-sampling-rate", "NaN"}, wantErr: "-tracing-sampling-rate"},
		{name: "OTEL_TRACES_SAMPLER", env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, protocol: "http", fromEnv: true, service: "RateLimit"},
		{name: "-tracing-sampling-rate wins", args: []string{"-tracing-sampling-rate", "0.5"}, env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"},
			protocol: "http", service: "RateLimit"},
		{name: "OTEL_SERVICE_NAME", env: map[string]string{"OTEL_SERVICE_NAME": "gw", "OTEL_RESOURCE_ATTRIBUTES": "service.namespace=prod"},
			protocol: "http", service: "gw", ns: "prod"},
		{name: "-tracing-service-name wins", args: []string{"-tracing-service-name", "rl"}, env: map[string]string{"OTEL_SERVICE_NAME": "gw"},
			protocol: "http", service: "rl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tracingEnv {
				t.Setenv(v, tc.env[v])
			}
			f, err := parseFlags(append([]string{"-config", "c.yaml"}, tc.args...), io.Discard)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.on, f.tracing.on, "on")
			assert.Equal(t, tc.protocol, f.tracing.protocol, "protocol")
			assert.Equal(t, tc.fromEnv, f.tracing.samplerFromEnv, "sampler from OTEL_TRACES_SAMPLER")
			res, err := f.tracing.resource(context.Background())
			require.NoError(t, err)
			attrs := map[string]string{}
			for _, kv := range res.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			assert.Equal(t, tc.service, attrs["service.name"], "service.name")
			assert.Equal(t, tc.ns, attrs["service.namespace"], "service.namespace")
			assert.NotEmpty(t, attrs["service.instance.id"], "service.instance.id")
		})
	}
}
