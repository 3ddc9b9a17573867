package dashboard

// Readable is readable, for tests.
var Readable = readable

// BucketLabel is bucketLabel, for tests.
var BucketLabel = bucketLabel
