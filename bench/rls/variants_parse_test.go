package rls

import (
	"reflect"
	"testing"
)

func TestParseVariants(t *testing.T) {
	tests := []struct {
		spec string
		want []variant
		err  bool
	}{
		{"base=", []variant{{name: "base"}}, false},
		{"base=; window=-grpc-window-bytes=65536 ;floor=-codec service", []variant{
			{name: "base"},
			{name: "window", flags: []string{"-grpc-window-bytes=65536"}},
			{name: "floor", flags: []string{"-codec", "service"}},
		}, false},
		{"gc=env:GOGC=200 -grpc-stream-workers=4", []variant{
			{name: "gc", flags: []string{"-grpc-stream-workers=4"}, env: []string{"GOGC=200"}},
		}, false},
		{"", nil, true},
		{";", nil, true},
		{"base", nil, true},
		{"=-x", nil, true},
		{"a/b=", nil, true},
		{"a#1=", nil, true},
		{"a=;a=-x", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseVariants(tt.spec)
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseVariants(%q) = %+v, %v; want %+v, error %v", tt.spec, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseClients(t *testing.T) {
	tests := []struct {
		s    string
		want []int
		err  bool
	}{
		{"", []int{16, 64}, false},
		{"1", []int{1}, false},
		{"16, 64,256", []int{16, 64, 256}, false},
		{"0", nil, true},
		{"16,x", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			got, err := parseClients(tt.s)
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseClients(%q) = %v, %v; want %v, error %v", tt.s, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestRedisOf(t *testing.T) {
	tests := []struct {
		flags []string
		want  string
		ok    bool
	}{
		{[]string{"-redis", "127.0.0.1:6379"}, "127.0.0.1:6379", true},
		{[]string{"-x", "-redis=r:1"}, "r:1", true},
		{[]string{"-redis"}, "", false},
		{[]string{"-redis="}, "", false},
		{[]string{"-redis-window-keys"}, "", false},
		{nil, "", false},
	}
	for _, tt := range tests {
		got, ok := redisOf(tt.flags)
		if got != tt.want || ok != tt.ok {
			t.Errorf("redisOf(%q) = %q, %v; want %q, %v", tt.flags, got, ok, tt.want, tt.ok)
		}
	}
}

func TestClientGOGC(t *testing.T) {
	tests := []struct {
		s        string
		pct      int
		set, err bool
	}{
		{"", 0, false, false},
		{"off", -1, true, false},
		{"100", 100, true, false},
		{"1", 1, true, false},
		{"0", 0, false, true},
		{"-1", 0, false, true},
		{"OFF", 0, false, true},
		{"50%", 0, false, true},
		{" 100", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			pct, set, err := clientGOGC(tt.s)
			if pct != tt.pct || set != tt.set || (err != nil) != tt.err {
				t.Errorf("clientGOGC(%q) = %d, %v, %v; want %d, %v, error %v", tt.s, pct, set, err, tt.pct, tt.set, tt.err)
			}
		})
	}
}
