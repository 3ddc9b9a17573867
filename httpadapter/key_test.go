package httpadapter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/a": "/a", "/a/": "/a/", "a": "/a", "//": "/", "/a//b": "/a/b",
		"/a/./b": "/a/b", "/a/../b": "/b", "/a/..": "/", "/a/.": "/a", "/a/b/": "/a/b/",
		"/a/b/../": "/a/", "/..": "/", "/.a/..b/c.": "/.a/..b/c.", "/a/.../": "/a/.../",
	} {
		assert.Equal(t, want, cleanPath(in), "cleanPath(%q)", in)
	}
}

func TestInsertLen(t *testing.T) {
	b := []byte("xx")
	b = append(b, "hello"...)
	assert.Equal(t, "xx5:hello", string(insertLen(b, 2)))
	assert.Equal(t, "0:", string(insertLen(nil, 0)))
}

func TestQueryAndCookieValues(t *testing.T) {
	v, ok := appendQueryValue(nil, "a=1&b=x%2Fy+z&b=2", "b")
	assert.True(t, ok)
	assert.Equal(t, "x/y z", string(v))
	v, ok = appendQueryValue(nil, "b=%zz", "b")
	assert.True(t, ok)
	assert.Equal(t, "%zz", string(v), "a bad escape keeps the raw value")
	_, ok = appendQueryValue(nil, "ab=1", "b")
	assert.False(t, ok)
	c, ok := cookieValue([]string{"a=1;b=\"2\"; c=3"}, "b")
	assert.True(t, ok)
	assert.Equal(t, "2", c)
	_, ok = cookieValue([]string{"a=1"}, "b")
	assert.False(t, ok)
}

func TestSleep(t *testing.T) {
	assert.NoError(t, sleep(context.Background(), time.Nanosecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, sleep(ctx, time.Hour), context.Canceled)
}
