package cluster

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// fakeStream is a server stream that receives msgs, then waits for end.
type fakeStream struct {
	msgs []*remote.RemoteMessage
	end  chan struct{}
}

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.msgs) == 0 {
		<-f.end
		return context.Canceled
	}
	proto.Merge(m.(*remote.RemoteMessage), f.msgs[0])
	f.msgs = f.msgs[1:]
	return nil
}

func (*fakeStream) SetHeader(metadata.MD) error  { return nil }
func (*fakeStream) SendHeader(metadata.MD) error { return nil }
func (*fakeStream) SetTrailer(metadata.MD)       {}
func (*fakeStream) Context() context.Context     { return context.Background() }
func (*fakeStream) SendMsg(any) error            { return nil }

// connect is the engine's first message on a stream from the member id.
func connect(id string) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: id, Address: id + ":1"}},
	}}}
}

// batch is a later message.
func batch() *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{}}}
}

// TestPeerStreamsHolding: a leaving member lingers for the streams opened
// before its leave began from members it takes for live, or not named
// yet; not for those that have ended, come from a member it no longer
// takes for live, or were opened since.
func TestPeerStreamsHolding(t *testing.T) {
	// stream is one stream to the server: from id ("" sends no connect
	// request), opened after the mark or before, ended or open.
	type stream struct {
		id           string
		after, ended bool
	}
	live := func(id string) bool { return id == "live" }
	for _, tc := range []struct {
		name    string
		streams []stream
		want    bool
	}{
		{"none", nil, false},
		{"a live member's", []stream{{id: "live"}}, true},
		{"a live member's, ended", []stream{{id: "live", ended: true}}, false},
		{"a gone member's", []stream{{id: "gone"}}, false},
		{"not named yet", []stream{{id: ""}}, true},
		{"a live member's, opened since", []stream{{id: "live", after: true}}, false},
		{"a gone member's and a live one's", []stream{{id: "gone"}, {id: "live"}}, true},
		{"a gone member's and a live one's ended", []stream{{id: "gone"}, {id: "live", ended: true}, {id: "live", after: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps peerStreams
			var mark uint64
			marked := false
			type open struct {
				end  chan struct{}
				done chan error
			}
			var opens []open
			start := func(s stream) {
				f := &fakeStream{end: make(chan struct{})}
				if s.id != "" {
					f.msgs = []*remote.RemoteMessage{connect(s.id), batch()}
				}
				read := make(chan struct{})
				o := open{end: f.end, done: make(chan error, 1)}
				go func() {
					o.done <- ps.intercept(nil, f, &grpc.StreamServerInfo{}, func(_ any, ss grpc.ServerStream) error {
						for range len(f.msgs) {
							assert.NoError(t, ss.RecvMsg(new(remote.RemoteMessage)))
						}
						close(read)
						return ss.RecvMsg(new(remote.RemoteMessage))
					})
				}()
				<-read
				if s.ended {
					close(f.end)
					<-o.done
					return
				}
				opens = append(opens, o)
			}
			for _, s := range tc.streams {
				if s.after && !marked {
					mark, marked = ps.opened(), true
				}
				start(s)
			}
			if !marked {
				mark = ps.opened()
			}
			assert.Equal(t, tc.want, ps.holding(mark, live))
			for _, o := range opens {
				close(o.end)
				assert.ErrorIs(t, <-o.done, context.Canceled)
			}
			assert.False(t, ps.holding(mark, live), "every stream ended")
		})
	}
}
