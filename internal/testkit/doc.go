// Package testkit is what the module's tests share: a fake clock held by
// one test and moved only by it, the harness of the kill -9 tests (a child
// process under load, killed with SIGKILL, whose callers' decisions are
// read back), and the harness that runs cluster members as processes. It
// is for tests only; nothing else imports it.
package testkit
