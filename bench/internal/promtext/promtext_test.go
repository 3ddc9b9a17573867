package promtext

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValue(t *testing.T) {
	page := "# HELP up x\nactorlimitd_cluster_members 3\nactorlimitd_cluster_members_other 9\nlabelled{a=\"b\"} 4\nbad notanumber\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, page) }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"actorlimitd_cluster_members", 3},
		{"actorlimitd_cluster_members_other", 9},
		{"labelled", -1},
		{"bad", -1},
		{"absent", -1},
	} {
		assert.Equal(t, tc.want, Value(srv.Client(), addr, tc.name), tc.name)
	}
	assert.Equal(t, -1.0, Value(srv.Client(), "127.0.0.1:1", "up"), "nothing listening")
}
