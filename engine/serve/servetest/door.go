// Package servetest holds a door in front of an OpenAI-compatible server that a test can use to
// kill the server mid-step, shared by engine's in-process PRM test and the root package's test
// of `agentrl-tui serve` as a process of its own.
package servetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Door forwards requests, one at a time, to the server at a base URL ending in /v1, and calls its
// kill function when the killAt-th POST arrives, before forwarding it (which then fails). GETs (a
// client reading the model list) pass without being counted.
type Door struct {
	// URL is the door's own base URL, ending in /v1: what a client is given in place of the
	// server's.
	URL string

	mu             sync.Mutex
	seen, answered int
}

// NewDoor opens a door to base that calls kill at request killAt; it closes with the test.
func NewDoor(t testing.TB, base string, killAt int, kill func()) *Door {
	d := &Door{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		post := r.Method == http.MethodPost
		if post {
			if d.seen++; d.seen == killAt {
				kill()
			}
		}
		req, _ := http.NewRequest(r.Method, base+strings.TrimPrefix(r.URL.Path, "/v1"), r.Body)
		req.Header = r.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if post && resp.StatusCode == http.StatusOK {
			d.answered++
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL + "/v1"
	return d
}

// Answered is the number of POSTs the server answered with 200 OK.
func (d *Door) Answered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answered
}
