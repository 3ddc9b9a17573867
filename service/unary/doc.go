// Package unary serves unary gRPC calls over HTTP/2 on a net.Listener, for
// a few methods given by their path, with less work a call than grpc-go's
// server: it is actorlimitd's -grpc-transport direct. Every connection
// whose first call is not one of its methods is handed, with the bytes
// read so far replayed, to a fallback (a *grpc.Server), which serves it as
// if it had accepted it: streams, other services, reflection.
//
//	srv, err := unary.New(unary.Config{
//		Handlers: map[string]unary.Handler{"/pkg.Service/Method": h},
//		Fallback: grpcServer,
//	})
//	go srv.Serve(listener)
//	...
//	srv.Shutdown(ctx) // GOAWAY, calls in flight answered
//	grpcServer.GracefulStop()
//
// # Design
//
// A connection has one reader goroutine, which reads frames with
// golang.org/x/net/http2's Framer and keeps the streams. The first call's
// headers are read with the Framer's ReadMetaHeaders (HPACK, CONTINUATION,
// the header list bound); from then on the reader decodes header blocks
// with the same decoder and the same rules and bounds itself, into a
// buffer it keeps, as ReadMetaHeaders allocates 7 to 8 times a block (a
// closure, the frame, the growing field list): with it the transport made
// 10 to 11 allocations a call, now 2 to 3 (the stream, the HEADERS frame's
// parse, a goroutine when no worker is free). A call
// whose request is complete runs on a worker (Config.Workers) or a
// goroutine of its own; its handler appends the answer to a pooled buffer.
// Answers are written under the connection's mutex into one buffered
// writer, and the last call to finish among those pending flushes it, so
// that concurrent answers leave in one write; a call that finishes while
// others are pending yields once and then flushes if none did meanwhile,
// so that an answer never waits for a slow call. The reader flushes its
// own frames (SETTINGS ACKs, WINDOW_UPDATE, RST_STREAM, refusals) before it
// blocks on a read; PING ACKs alone wait for a pending call's answer to go
// with it, when a call is pending (a grpc-go client's BDP pings otherwise
// cost a write each: 2 writes a call against 0.64 in BenchmarkNullServer),
// so a PING ACK can wait as long as a call takes. Running a call in the reader
// when it is the only one pending saves a wakeup at 1 caller (22 against
// 29 µs a call) and costs more at 16 (17.5 against 13 µs): not done. Answers' header blocks are HPACK literals without
// indexing: the server keeps no dynamic table (the first block sets its
// size to 0), so any SETTINGS_HEADER_TABLE_SIZE of the client is honoured
// and answers cost no table work.
//
// A call's context is its stream: it ends when the client resets the
// stream, its grpc-timeout passes (the stream is then reset with CANCEL
// and the answer dropped, as grpc-go does), or the connection closes.
//
// # The decision and the hand-off
//
// After the client's preface the server sends an empty SETTINGS frame (a
// grpc-go client waits for the server's SETTINGS before its first call),
// and nothing else until it has read the first call's HEADERS. Up to then
// it only notes the client's SETTINGS, PINGs and connection WINDOW_UPDATEs.
// If the first call's :path is served here (and its message is not
// compressed: grpc-go may have the compressor), the server sends its own
// SETTINGS, the ACKs and PING ACKs owed, and serves the connection. If
// not, or on anything unusual before it (another frame type, a header list
// past the bound, an HPACK or frame error, 16 SETTINGS or PINGs, no call
// within Config.HandshakeTimeout), the connection goes to the fallback,
// which reads every byte from the start and writes its own SETTINGS: the
// client ACKs both, and grpc-go ignores the extra ACK
// (http2Server.handleSettings returns on an ACK); our empty SETTINGS
// changed nothing, so grpc-go's settings are the only ones in force. On
// TLS the server completes the handshake (ALPN "h2" required) and the
// fallback gets the *tls.Conn with no credentials of its own: its handlers
// then see no credentials.TLSInfo in peer.AuthInfo, and grpc-go does not
// check ALPN again.
//
// A connection is decided once: a later call on a connection served here
// for a method it does not serve (a health Watch, a stream) is answered
// UNIMPLEMENTED, its message saying to use a new connection.
//
// # Protocol
//
// Served: the client preface; SETTINGS both ways (the client's
// INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE and HEADER_TABLE_SIZE honoured);
// flow control both ways (answers wait, queued in order, when the client's
// windows are short, even 0; WINDOW_UPDATEs for the data read, batched at
// a quarter of a window; the connection's window is 1 MiB, a stream's 64
// KiB); PING ACK; GOAWAY on Shutdown with the calls started answered;
// RST_STREAM (the call's context ends, its answer is dropped); trailers
// with grpc-status, grpc-message (percent-encoded as grpc-go does) and
// grpc-status-details-bin. Requests are checked as grpc-go's server
// checks them, with its statuses and messages: :method POST,
// content-type application/grpc[+subtype], :authority or host, the
// connection header, grpc-timeout's syntax, grpc-encoding (none but
// identity: UNIMPLEMENTED), the message prefix (compressed flag:
// INTERNAL; over Config.MaxRecvMsgSize: RESOURCE_EXHAUSTED), one message
// a call. The te header is not checked, as grpc-go does not.
//
// Defences: the header list bound and the Framer's CONTINUATION bound
// (PROTOCOL_ERROR); Config.MaxConcurrentStreams counts the calls whose
// handler still runs after a reset, so a rapid reset cannot run more
// handlers at once than the bound (REFUSED_STREAM beyond); 4096 frames that
// lead to no answer (resets, SETTINGS, frames on closed streams) between
// two answers close the connection with ENHANCE_YOUR_CALM; pings are held
// to grpc-go's keepalive enforcement (KeepaliveMinTime; a third early
// ping: GOAWAY ENHANCE_YOUR_CALM "too_many_pings"); windows past 2^31-1
// are FLOW_CONTROL_ERROR; an even, reused or backward stream id is
// PROTOCOL_ERROR; a handshake timeout; a keepalive ping on a quiet
// connection, closed when unanswered; a write timeout for a client that
// does not read; MaxConnectionAge and its grace.
//
// # Limits
//
// Not served: PRIORITY (ignored), server push, compression, metadata
// (headers are not given to handlers: -bin headers are not decoded, so a
// malformed one is not refused as grpc-go refuses it), stats handlers and
// interceptors (tracing), channelz. A request whose END_STREAM comes with
// a message cut short is answered INTERNAL "unexpected EOF".
package unary
