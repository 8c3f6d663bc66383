package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestRedisClientMessagesAreLogLines: go-redis's own messages become one
// JSON warning each in the service's log.
func TestRedisClientMessagesAreLogLines(t *testing.T) {
	var buf bytes.Buffer
	l := redisLogger{slog.New(slog.NewJSONHandler(&buf, nil))}
	l.Printf(context.Background(), "Unexpected conn[%d] state changed by hook to %v, closing it", 7, "CLOSED")
	var line struct {
		Level, Msg, Detail string
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log output %q is not one JSON line: %v", buf.String(), err)
	}
	want := "Unexpected conn[7] state changed by hook to CLOSED, closing it"
	if line.Level != "WARN" || line.Msg != "redis client" || line.Detail != want {
		t.Errorf("log line = %+v, want level WARN, msg %q, detail %q", line, "redis client", want)
	}
}
