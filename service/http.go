package service

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxJSONBody is JSONHandler's bound on the body of a POST /json request,
// in bytes.
const MaxJSONBody = 1 << 20

// JSONHandler serves envoy ratelimit's POST /json with bodies of up to
// MaxJSONBody bytes: JSONHandlerBounded's handler.
func JSONHandler(s *Server) http.Handler { return JSONHandlerBounded(s, MaxJSONBody) }

// JSONHandlerBounded serves envoy ratelimit's POST /json: the body, of up
// to maxBody bytes, is a RateLimitRequest as protojson, the answer its
// RateLimitResponse as protojson, with 200 when OK, 429 when over the
// limit, 413 for a body over maxBody, 400 for a request that cannot be
// read or is refused, and 500 otherwise. The body is checked against the
// Server's bounds by Bounds.ScanJSON before it is decoded.
func JSONHandlerBounded(s *Server, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a RateLimitRequest as JSON", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > maxBody {
			tooLarge(w, maxBody)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				tooLarge(w, maxBody)
				return
			}
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.bounds.ScanJSON(body); err != nil {
			if m := s.o.Metrics; m != nil {
				m.codes["invalid"].Inc()
			}
			s.countRefusal(err)
			http.Error(w, status.Convert(err).Message(), http.StatusBadRequest)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "the body is not a RateLimitRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			code := http.StatusInternalServerError
			if status.Code(err) == codes.InvalidArgument {
				code = http.StatusBadRequest
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}

// tooLarge answers a body over the bound.
func tooLarge(w http.ResponseWriter, maxBody int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("the body is over %d bytes, the bound of a request's size", maxBody), http.StatusRequestEntityTooLarge)
}

// ConfigHandler serves GET /rlconfig: the configuration files in force, as
// text, the values of secret descriptors redacted (Config.RedactedSource
// with the Server's Options.Secrets.Keys).
func ConfigHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(s.Config().RedactedSource(s.o.Secrets.Keys))
	})
}
