package dashboard

// Readable is readable, for tests.
var Readable = readable
