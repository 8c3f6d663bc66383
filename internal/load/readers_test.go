package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"inventory/internal/testenv"
)

// TestEveryReaderThatStartedHasAnAnswer: readers stopped while their
// first request is still being answered (a short run on a busy machine)
// still count that answer, so a run with readers always shows reads.
// Before, stop cancelled the requests in flight and a short run reported
// OK 0 (TestReadersBesideTheSales failed so under load).
func TestEveryReaderThatStartedHasAnAnswer(t *testing.T) {
	const n = 3
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"at":"2026-11-28T00:00:00Z","replica":{},"default":"atomic","products":[],"last_sale_id":0}`)
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(srv.URL, "", n, nil)
	r := c.startReaders(context.Background(), n, "sku-1")
	for range n {
		<-arrived // every reader's first request is at the server
	}
	done := make(chan *Reads)
	go func() { done <- r.stop(n, 1) }()
	testenv.WaitFor(t, "the readers to be told to stop", 10*time.Second, func() bool { return !r.reading(context.Background()) })
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	reads := <-done
	if reads.OK != n || len(reads.Failed) != 0 {
		t.Errorf("reads stopped mid-request = %+v, want the %d answers in flight counted", reads, n)
	}
}
