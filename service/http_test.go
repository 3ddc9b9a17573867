package service_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

func TestJSONHandler(t *testing.T) {
	f := newFixture(t, decisions, service.Options{})
	h := service.JSONHandler(f.srv)
	do := func(method, body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/json", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	req := `{"domain":"web","descriptors":[{"entries":[{"key":"path","value":"/x"}]}]}`
	for i, want := range []int{200, 200, 429} {
		code, body := do(http.MethodPost, req)
		assert.Equal(t, want, code, "request %d: %s", i, body)
	}
	code, _ := do(http.MethodPost, `not json`)
	assert.Equal(t, http.StatusBadRequest, code)
	code, body := do(http.MethodPost, `{"domain":"","descriptors":[{}]}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "domain must not be empty")
	code, _ = do(http.MethodGet, "")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	// A request within every bound of the service, padded with white space
	// to one byte past MaxJSONBody: only the body's own bound can refuse it;
	// one byte less is served.
	head, tail := `{"domain":"web",`, `"descriptors":[{"entries":[{"key":"path","value":"/y"}]}]}`
	pad := func(size int) string { return head + strings.Repeat(" ", size-len(head)-len(tail)) + tail }
	code, body = do(http.MethodPost, pad(service.MaxJSONBody+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, "a body past MaxJSONBody: %s", body)
	code, body = do(http.MethodPost, pad(service.MaxJSONBody))
	assert.Equal(t, http.StatusOK, code, "the same request of MaxJSONBody bytes: %s", body)

	lim, err := actorlimit.Start()
	assert.NoError(t, err)
	srv, err := service.New(nil, service.Options{Limiter: lim})
	assert.NoError(t, err)
	cfg, _ := service.Parse(map[string][]byte{"c.yaml": []byte(decisions)})
	srv.SetConfig(cfg)
	lim.Close()
	rec := httptest.NewRecorder()
	service.JSONHandler(srv).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(req)))
	assert.Equal(t, http.StatusInternalServerError, rec.Code, "the limiter closed: %s", rec.Body.String())

	rec = httptest.NewRecorder()
	service.ConfigHandler(f.srv).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/rlconfig", nil))
	assert.Contains(t, rec.Body.String(), "# test.yaml\n")
}
