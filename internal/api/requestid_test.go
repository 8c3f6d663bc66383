package api

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestValidRequestID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"req-from-client-42", true},
		{"a", true},
		{"A.b_c-9", true},
		{"0123456789abcdef0123456789abcdef", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"bad id", false},
		{"bad\nid", false},
		{"bad\x00id", false},
		{"<script>", false},
		{`"quoted"`, false},
		{"a,b", false},
		{"a/b", false},
		{"naïve", false},
	}
	for _, tt := range tests {
		if got := validRequestID(tt.id); got != tt.want {
			t.Errorf("validRequestID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestNewRequestIDIsSafeAndFresh(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) || !validRequestID(id) {
			t.Fatalf("newRequestID() = %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("newRequestID() returned %q twice in 1000 calls", id)
		}
		seen[id] = true
	}
}

// TestReplicaKeepsOnlySafeRequestIDs calls the real server (no nginx in
// front): a safe X-Request-ID is kept, anything else replaced by a new safe
// one, and every answer carries exactly one X-Request-ID, the same one its
// problem body names.
func TestReplicaKeepsOnlySafeRequestIDs(t *testing.T) {
	f := newFixture(t, adminToken)
	tests := []struct {
		name  string
		given []string
		keep  bool
	}{
		{"none", nil, false},
		{"safe", []string{"req-from-client-42"}, true},
		{"64 characters", []string{strings.Repeat("a", 64)}, true},
		{"65 characters", []string{strings.Repeat("a", 65)}, false},
		{"empty", []string{""}, false},
		{"space", []string{"bad id"}, false},
		{"markup", []string{"<script>alert(1)</script>"}, false},
		{"quote", []string{`a"b`}, false},
		{"non-ASCII", []string{"naïve"}, false},
		{"given twice", []string{"first-id", "second-id"}, false},
	}
	for _, tt := range tests {
		var header []string
		for _, v := range tt.given {
			header = append(header, "X-Request-ID", v)
		}
		// A 404 problem: its body says which request id the server used.
		resp := f.do(http.MethodGet, "/no-such-route", "", "", header...)
		ids := resp.header.Values("X-Request-ID")
		if len(ids) != 1 {
			t.Errorf("%s: GET /no-such-route with X-Request-ID %q answered %d X-Request-IDs %q, want exactly 1", tt.name, tt.given, len(ids), ids)
			continue
		}
		id := ids[0]
		switch {
		case tt.keep && id != tt.given[0]:
			t.Errorf("%s: X-Request-ID %q answered %q, want it kept", tt.name, tt.given, id)
		case !tt.keep && !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id):
			t.Errorf("%s: X-Request-ID %q answered %q, want a new 32-hex id", tt.name, tt.given, id)
		}
		if resp.status != http.StatusNotFound || resp.body["request_id"] != id {
			t.Errorf("%s: GET /no-such-route = %d, problem request_id %v; want 404 naming the header's id %q", tt.name, resp.status, resp.body["request_id"], id)
		}
	}
	a := f.do(http.MethodGet, "/healthz", "", "").header.Get("X-Request-ID")
	b := f.do(http.MethodGet, "/healthz", "", "").header.Get("X-Request-ID")
	if a == b {
		t.Errorf("two requests without an id both got %q, want a fresh id each", a)
	}
}
