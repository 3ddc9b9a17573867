package rls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// gubernator's API is called with messages encoded here from its proto's
// field numbers (pb.gubernator.V1/GetRateLimits: GetRateLimitsReq holds
// repeated RateLimitReq in field 1; RateLimitReq is name 1, unique_key 2,
// hits 3, limit 4, duration 5 in ms, algorithm 6 (0: token bucket);
// RateLimitResp is status 1 (1: over the limit), remaining 3, error 5), so
// that its module, and all it brings, stays out of bench/go.mod.
const gubernatorMethod = "/pb.gubernator.V1/GetRateLimits"

// rawCodec sends and receives messages already encoded, as *rawMsg.
type rawCodec struct{}

type rawMsg struct{ b []byte }

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*rawMsg).b, nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*rawMsg).b = append(v.(*rawMsg).b[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// guberReq is one rate limit of a GetRateLimits call.
type guberReq struct {
	Name, Key string
	Hits      int64
	Limit     int64
	Duration  time.Duration
}

// encodeGuber encodes a GetRateLimitsReq holding reqs (token buckets).
func encodeGuber(buf []byte, reqs []guberReq) []byte {
	buf = buf[:0]
	for _, r := range reqs {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, r.Name)
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendString(m, r.Key)
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(r.Hits))
		m = protowire.AppendTag(m, 4, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(r.Limit))
		m = protowire.AppendTag(m, 5, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(r.Duration.Milliseconds()))
		buf = protowire.AppendTag(buf, 1, protowire.BytesType)
		buf = protowire.AppendBytes(buf, m)
	}
	return buf
}

// guberResp is what the benchmarks read of a RateLimitResp.
type guberResp struct {
	Over      bool
	Remaining int64
	Err       string
}

// decodeGuber decodes a GetRateLimitsResp.
func decodeGuber(b []byte) ([]guberResp, error) {
	var out []guberResp
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		m, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var r guberResp
		for len(m) > 0 {
			num, typ, n := protowire.ConsumeTag(m)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			m = m[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(m)
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				r.Over, m = v == 1, m[n:]
			case num == 3 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(m)
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				r.Remaining, m = int64(v), m[n:]
			case num == 5 && typ == protowire.BytesType:
				v, n := protowire.ConsumeString(m)
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				r.Err, m = v, m[n:]
			default:
				n := protowire.ConsumeFieldValue(num, typ, m)
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				m = m[n:]
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// guberClient calls one gubernator over its own connection.
type guberClient struct {
	conn     *grpc.ClientConn
	req, out rawMsg
}

func newGuberClient(addr string) (*guberClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, err
	}
	return &guberClient{conn: conn}, nil
}

// call asks for reqs and returns the answers, an error when the call failed
// or any answer carries one.
func (c *guberClient) call(ctx context.Context, reqs []guberReq) ([]guberResp, error) {
	c.req.b = encodeGuber(c.req.b, reqs)
	if err := c.conn.Invoke(ctx, gubernatorMethod, &c.req, &c.out); err != nil {
		return nil, err
	}
	resps, err := decodeGuber(c.out.b)
	if err != nil {
		return nil, err
	}
	if len(resps) != len(reqs) {
		return nil, fmt.Errorf("gubernator: %d answers to %d limits", len(resps), len(reqs))
	}
	for _, r := range resps {
		if r.Err != "" {
			return nil, errors.New("gubernator: " + r.Err)
		}
	}
	return resps, nil
}

// gubernatorReady is ready once a GetRateLimits call is answered without
// error (gubernator answers errors until it has its peer list).
func gubernatorReady(addr string) func() error {
	return func() error {
		c, err := newGuberClient(addr)
		if err != nil {
			return err
		}
		defer c.conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = c.call(ctx, []guberReq{{Name: "ready", Key: "ready", Hits: 0, Limit: 1, Duration: time.Second}})
		return err
	}
}
