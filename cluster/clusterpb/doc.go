// Package clusterpb holds the protobuf messages the members of an
// actorlimit cluster exchange. The Go code is generated from limit.proto;
// run go generate in this directory after changing it.
package clusterpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative limit.proto
