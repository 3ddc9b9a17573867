// Package algo is the one home of actorlimit's algorithms: the list of them,
// the types a check and its decision travel in, and the validation of a
// policy.
//
// It sits below everything else: the public package, the limiter actor and
// every store (the embedded table, a networked store) import it, and it
// imports nothing of actorlimit's. A store and the actor agree on [Check] and
// [Decision] through it, so no store imports the actor.
//
// # The list
//
// [Algorithm] names an algorithm; the list in algorithm.go gives each its Go
// name ([Algorithm.String]), its name in configuration files
// ([Algorithm.MarshalText]: "fixed_window", "sliding_window", "gcra",
// "token_bucket", "leaky_bucket", "sliding_log") and the rules its policies
// must follow ([Validate]). Adding an algorithm is a constant, one entry of
// that list, and the file that decides it.
package algo
