// Package unary serves unary gRPC calls over HTTP/2 on a net.Listener, for
// a few methods given by their path, with less work a call than grpc-go's
// server: it is actorlimitd's -grpc-transport direct. Every connection
// whose first call is not one of its methods is handed, with the bytes
// read so far replayed, to a fallback (a *grpc.Server), which serves it as
// if it had accepted it: streams, other services, reflection. On a
// connection served here, a later call of another method is proxied, in
// process, to the fallback.
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
// A connection is decided once. A later call on a connection served here
// that it cannot serve itself (another method: an RLQS stream, a health
// Watch, reflection; or a compressed call) is proxied to the fallback,
// as Envoy shares a cluster's connections between its filters.
//
// # The proxy
//
// A connection keeps a grpc-go client of the fallback, made on its first
// proxied call and closed with it, whose connection is a net.Pipe given to
// the fallback's listener (plaintext: it never leaves the process). One a
// connection, not one a Server: the fallback's bounds of a connection
// (MaxConcurrentStreams above all, as RLQS streams live long; keepalive;
// MaxConnectionAge) then bind a client's proxied calls as they would on a
// connection handed off, not every client's calls at once. A proxied call is a stream of that client, both ways
// whatever the method's shape (the fallback checks it), with a codec that
// passes messages through as bytes under the client's content-subtype.
// The client's metadata goes on as the stream's outgoing metadata (-bin
// values decoded; not the pseudo-headers, HTTP/2's connection headers, te,
// content-type, user-agent, grpc-timeout, grpc-encoding,
// grpc-accept-encoding), its :authority (or host) as the call's authority,
// its grpc-timeout as the stream's deadline. The fallback's handlers see
// the pipe as their peer: no address, no credentials.TLSInfo.
//
// Two goroutines a proxied call: one opens the fallback's stream and
// relays the answer (headers, messages, then grpc-status, grpc-message,
// details and trailers; trailers-only when the call fails before its
// headers), the other relays the client's messages and its END_STREAM.
// The reader takes a proxied call's DATA as it comes and hands each whole
// message (bounded by Config.MaxRecvMsgSize) to the sender; it gives the
// stream's window back only while no message waits for the fallback, so a
// client that sends faster than the fallback reads is held to a window
// and a message here. Answers wait in the transport's queue for the
// client's windows, as answers of handlers do, and the proxy reads no
// more than 64 KiB ahead of what went out. A compressed call's messages
// are decompressed with the compressor registered in the process for its
// grpc-encoding (encoding.GetCompressor; bounded by MaxRecvMsgSize) and
// sent plain; answers come back plain. A proxied call ends with its
// stream: the client's RST_STREAM, its deadline, or the connection's end
// cancels the fallback's stream, and both goroutines end; it counts
// against Config.MaxConcurrentStreams until they have. Shutdown's GOAWAY
// lets proxied calls run to their end, as other calls, within Shutdown's
// context (a health Watch never ends by itself: Shutdown's context then
// closes it).
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
// identity, unless the call is proxied), the message prefix (compressed
// flag: INTERNAL; over Config.MaxRecvMsgSize: RESOURCE_EXHAUSTED), one
// message a call (a proxied call: any number). The te header is not checked, as grpc-go does not.
//
// Defences: the header list bound and the Framer's CONTINUATION bound
// (PROTOCOL_ERROR); Config.MaxConcurrentStreams counts the calls whose
// handler still runs after a reset, so a rapid reset cannot run more
// handlers at once than the bound (REFUSED_STREAM beyond); 4096 frames that
// lead to no answer (resets, SETTINGS, frames on closed streams) between
// two answers close the connection with ENHANCE_YOUR_CALM; pings are held
// to grpc-go's keepalive enforcement (KeepaliveMinTime; a third early
// ping with no DATA or HEADERS frame written since the last: GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings"); windows past 2^31-1
// are FLOW_CONTROL_ERROR; an even, reused or backward stream id is
// PROTOCOL_ERROR; a handshake timeout; a keepalive ping on a quiet
// connection, closed when unanswered; a write timeout for a client that
// does not read; MaxConnectionAge and its grace.
//
// # Limits
//
// Not served by the handlers: PRIORITY (ignored), server push,
// compression (a compressed call is proxied; without a Fallback, or with
// an encoding not registered, UNIMPLEMENTED), metadata (headers are not
// given to handlers: -bin headers are not decoded, so a malformed one is
// not refused as grpc-go refuses it; a proxied call's are, and refused
// INTERNAL as grpc-go does), stats handlers and interceptors (tracing),
// channelz. A request whose END_STREAM comes with a message cut short is
// answered INTERNAL "unexpected EOF". Without a Fallback, a later call of
// another method is UNIMPLEMENTED, its message saying to use a new
// connection. A proxied call costs what grpc-go's client and server cost
// (its messages are copied twice more, once by each; a connection's first
// proxied call makes the client, its goroutines and the fallback's), and
// its answer is never compressed. A proxied call whose goroutine opens the
// fallback's stream after Shutdown closed the fallback's listener (the
// connection's first proxied call, arrived just before GOAWAY) is
// answered UNAVAILABLE.
package unary
