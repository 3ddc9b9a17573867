package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// demoRequests sends cfg.limit+3 GET requests to url and prints the status
// and Retry-After of each answer.
func demoRequests(ctx context.Context, url string, cfg config, stdout io.Writer) error {
	tr := &http.Transport{} // no proxy, no state shared with other clients
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	n := cfg.limit + 3
	fmt.Fprintf(stdout, "demo: %s; sending %d requests\n", peerLimit(cfg), n)
	var allowed, refused int
	for i := int64(1); i <= n; i++ {
		status, retry, rl, err := get(ctx, client, url)
		if err != nil {
			return fmt.Errorf("demo: request %d: %w", i, err)
		}
		line := fmt.Sprintf("request %d: %d %s", i, status, http.StatusText(status))
		switch status {
		case http.StatusOK:
			allowed++
		case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
			refused++
		}
		switch {
		case retry != "":
			line += ", Retry-After: " + retry
		case status == http.StatusRequestEntityTooLarge:
			line += ", no Retry-After: no wait helps"
		}
		if rl != "" { // only with -rules
			line += ", RateLimit: " + rl
		}
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "demo: %d allowed, %d refused\n", allowed, refused)
	return nil
}

// get sends a GET request to url and returns the answer's status and its
// Retry-After and RateLimit headers.
func get(ctx context.Context, client *http.Client, url string) (status int, retry, rateLimit string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", "", err
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"), nil
}
