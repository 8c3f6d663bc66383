package nginx

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/internal/api"
	"inventory/internal/api/spectest"
)

// The edge: what nginx itself answers (body limit, its own errors as
// problem+json, the request id), checked in the config and by running it.

// nginxProblems are nginx's own error answers: status → problem type slug.
// The slugs shared with the replicas (internal/api/problem.go) mean the same
// there.
var nginxProblems = map[int]string{
	400: "malformed-request",
	404: "not-found",
	408: "request-timeout",
	413: "body-too-large",
	414: "uri-too-long",
	429: "too-many-requests",
	500: "internal",
	501: "not-implemented",
	502: "bad-gateway",
	503: "unavailable",
	504: "gateway-timeout",
	505: "http-version-not-supported",
}

// replicaSlugs are the slugs of nginxProblems that the replicas use too.
var replicaSlugs = []string{"malformed-request", "not-found", "body-too-large", "internal", "unavailable"}

var (
	errorPageLine = regexp.MustCompile(`(?m)^\s*error_page\s+([0-9 ]+?)\s+(\S+);`)
	exactLocation = regexp.MustCompile(`(?m)^\s*location\s+=\s+(\S+)\s+\{`)
	returnLine    = regexp.MustCompile(`(?m)^\s*return\s+(\d+)\s+'([^']*)';`)
	sizeDirective = regexp.MustCompile(`(?m)^\s*(client_max_body_size|client_body_buffer_size)\s+(\d+)([km]?);`)
)

// block returns the body of the block that opens at the "{" ending conf[:start].
func block(conf string, start int) string {
	depth := 1
	for i := start; i < len(conf); i++ {
		switch conf[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return conf[start:i]
			}
		}
	}
	return conf[start:]
}

func sizeBytes(n, unit string) int {
	v, _ := strconv.Atoi(n)
	switch unit {
	case "k":
		return v << 10
	case "m":
		return v << 20
	}
	return v
}

// checkEdgeRules checks an nginx.conf for the edge's rules; name says which.
func checkEdgeRules(t *testing.T, name, conf string) {
	t.Helper()
	sizes := map[string]int{}
	for _, m := range sizeDirective.FindAllStringSubmatch(conf, -1) {
		sizes[m[1]] = sizeBytes(m[2], m[3])
	}
	// The replicas refuse bodies over 4 KiB with their own 413; nginx's
	// limit must sit above that, and every allowed body fit its buffer.
	if limit := sizes["client_max_body_size"]; limit <= 4<<10 || limit > 1<<20 {
		t.Errorf("%s: client_max_body_size = %d bytes, want above the replicas' 4 KiB and at most 1 MiB", name, limit)
	}
	if sizes["client_body_buffer_size"] < sizes["client_max_body_size"] {
		t.Errorf("%s: client_body_buffer_size %d < client_max_body_size %d: allowed bodies would go to temp files", name, sizes["client_body_buffer_size"], sizes["client_max_body_size"])
	}
	if regexp.MustCompile(`(?m)^\s*proxy_intercept_errors\s+on`).MatchString(conf) {
		t.Errorf("%s: proxy_intercept_errors on would replace the replicas' own problems", name)
	}
	for _, want := range []string{"proxy_hide_header X-Request-ID;", "add_header X-Request-ID $inventory_request_id always;", "proxy_set_header X-Request-ID $inventory_request_id;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("%s: no %q", name, want)
		}
	}

	pages := map[int]string{}
	for _, m := range errorPageLine.FindAllStringSubmatch(conf, -1) {
		for _, code := range strings.Fields(m[1]) {
			n, _ := strconv.Atoi(code)
			pages[n] = m[2]
		}
	}
	locations := map[string]string{}
	for _, idx := range exactLocation.FindAllStringSubmatchIndex(conf, -1) {
		locations[conf[idx[2]:idx[3]]] = block(conf, idx[1])
	}
	for status, slug := range nginxProblems {
		uri, ok := pages[status]
		if !ok {
			t.Errorf("%s: no error_page for %d", name, status)
			continue
		}
		loc, ok := locations[uri]
		if !ok {
			t.Errorf("%s: error_page %d goes to %s, which has no location = %s", name, status, uri, uri)
			continue
		}
		for _, want := range []string{"internal;", "types { }", "default_type application/problem+json;", "add_header X-Request-ID $inventory_request_id always;", "add_header Cache-Control no-store always;"} {
			if !strings.Contains(loc, want) {
				t.Errorf("%s: location %s lacks %q", name, uri, want)
			}
		}
		ret := returnLine.FindStringSubmatch(loc)
		if ret == nil {
			t.Errorf("%s: location %s has no return CODE '...';", name, uri)
			continue
		}
		if ret[1] != strconv.Itoa(status) {
			t.Errorf("%s: location %s returns %s, want %d", name, uri, ret[1], status)
		}
		body := strings.ReplaceAll(strings.TrimSuffix(ret[2], `\n`), "$inventory_request_id", "some-id")
		checkProblemBody(t, fmt.Sprintf("%s: location %s", name, uri), []byte(body), status, slug, "some-id")
	}
	// 494 is nginx's "request header too large", which it sends as 400.
	if pages[494] != pages[400] {
		t.Errorf("%s: error_page 494 goes to %q, want the 400 page %q", name, pages[494], pages[400])
	}
}

// checkProblemBody checks an nginx problem body: exactly type, title,
// status, detail and request_id, nothing that names nginx.
func checkProblemBody(t *testing.T, what string, body []byte, status int, slug, requestID string) {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, body, err)
		return
	}
	var keys []string
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"detail", "request_id", "status", "title", "type"}; !slices.Equal(keys, want) {
		t.Errorf("%s: problem fields %q, want %q", what, keys, want)
	}
	if p["type"] != "urn:inventory:problem:"+slug || p["status"] != float64(status) || p["request_id"] != requestID {
		t.Errorf("%s: problem %v, want type urn:inventory:problem:%s, status %d, request_id %q", what, p, slug, status, requestID)
	}
	if title, _ := p["title"].(string); title == "" {
		t.Errorf("%s: problem has no title", what)
	}
	if detail, _ := p["detail"].(string); detail == "" {
		t.Errorf("%s: problem has no detail", what)
	}
	if strings.Contains(strings.ToLower(string(body)), "nginx") || strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("%s: problem %s tells internals", what, body)
	}
}

func TestConfAnswersItsOwnErrorsAsProblems(t *testing.T) {
	checkEdgeRules(t, "nginx.conf", Conf)
	files, err := LocalFiles("127.0.0.1:18080", []string{"127.0.0.1:1", "127.0.0.1:2"})
	if err != nil {
		t.Fatalf("LocalFiles: %v", err)
	}
	checkEdgeRules(t, "LocalFiles nginx.conf", files["nginx.conf"])

	problems := readRepoFile(t, "internal/api/problem.go")
	for _, slug := range replicaSlugs {
		if !strings.Contains(problems, `"`+slug+`"`) {
			t.Errorf("nginx answers problem type %s, which internal/api/problem.go does not use: keep one meaning per type", slug)
		}
	}
}

// answer is one HTTP answer as nginx sent it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// checkNginxProblem checks that a is nginx's own problem for status: the
// problem+json body, no-store, and exactly one X-Request-ID, the one the body
// names (wantID, or nginx's own 32 hex digits when wantID is "").
func checkNginxProblem(t *testing.T, what string, a answer, status int, wantID string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s = %d %s, want %d", what, a.status, a.body, status)
		return
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json (body %q)", what, ct, a.body)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, cc)
	}
	ids := a.header.Values("X-Request-ID")
	if len(ids) != 1 {
		t.Errorf("%s: %d X-Request-ID headers %q, want exactly 1", what, len(ids), ids)
		return
	}
	switch {
	case wantID != "" && ids[0] != wantID:
		t.Errorf("%s: X-Request-ID %q, want the caller's %q", what, ids[0], wantID)
	case wantID == "" && !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ids[0]):
		t.Errorf("%s: X-Request-ID %q, want nginx's 32-hex $request_id", what, ids[0])
	}
	checkProblemBody(t, what, a.body, status, nginxProblems[status], ids[0])
}

// send sends a request built by hand: raw HTTP is what these tests are
// about (bodies, methods, URIs and headers nginx must refuse itself).
func send(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %.80s through nginx: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, body}
}

// sendRaw writes raw to nginx on a fresh connection and reads one answer.
func sendRaw(t *testing.T, base, raw string) answer {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read nginx's answer to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, body}
}

// onlyReader hides a reader's length, so the client sends it chunked.
type onlyReader struct{ io.Reader }

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// stuckAddr is a loopback address whose listener never accepts and whose
// accept queue is full, so the kernel drops new connections' SYNs: a
// connect there times out, like a replica that cannot take connections.
func stuckAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue until a connect times out: that is the state nginx will meet.
	for range 10 {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return addr
			}
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Fatalf("connects to %s with a backlog of 0 keep succeeding; cannot make a stuck upstream", addr)
	return ""
}

func TestNginxOwnErrorsAreProblems(t *testing.T) {
	a := startUpstream(t, "a")
	base := startNginx(t, a)
	c := &http.Client{Timeout: 10 * time.Second}
	post := func(body io.Reader, requestID string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, base+"/sale", body)
		req.Header.Set("Content-Type", "application/json")
		if requestID != "" {
			req.Header.Set("X-Request-ID", requestID)
		}
		return req
	}
	big := strings.Repeat("x", 8<<20)

	before := a.requests.Load()
	checkNginxProblem(t, "POST /sale with an 8 MiB body", send(t, c, post(strings.NewReader(big), "")), 413, "")
	checkNginxProblem(t, "POST /sale with an 8 MiB chunked body", send(t, c, post(onlyReader{strings.NewReader(big)}, "big-chunked-1")), 413, "big-chunked-1")
	checkNginxProblem(t, "POST /sale with a 65 KiB body", send(t, c, post(strings.NewReader(strings.Repeat("x", 65<<10)), "")), 413, "")
	if n := a.requests.Load() - before; n != 0 {
		t.Errorf("bodies over the limit reached the upstream %d times, want 0", n)
	}
	// Up to the limit, the body goes through (the replicas judge it).
	if got := send(t, c, post(strings.NewReader(strings.Repeat("x", 64<<10)), "")); got.status != 200 {
		t.Errorf("POST /sale with a 64 KiB body = %d %q, want the upstream's 200", got.status, got.body)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/"+strings.Repeat("a", 16<<10), nil)
	checkNginxProblem(t, "GET with a 16 KiB URI", send(t, c, req), 414, "")
	req, _ = http.NewRequest(http.MethodGet, base+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("p", 16<<10))
	checkNginxProblem(t, "GET with a 16 KiB header", send(t, c, req), 400, "")
	checkNginxProblem(t, "a request line that is not HTTP", sendRaw(t, base, "GARBAGE\r\n\r\n"), 400, "")
	checkNginxProblem(t, "a bad Content-Length", sendRaw(t, base, "POST /sale HTTP/1.1\r\nHost: x\r\nX-Request-ID: raw-1\r\nContent-Length: abc\r\n\r\n"), 400, "raw-1")
	checkNginxProblem(t, "Transfer-Encoding: gzip", sendRaw(t, base, "POST /sale HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"), 501, "")
	checkNginxProblem(t, "HTTP/3.0 on a HTTP/1 port", sendRaw(t, base, "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n"), 505, "")
	req, _ = http.NewRequest(http.MethodGet, base+"/_problem/502", nil)
	checkNginxProblem(t, "GET /_problem/502 (an internal location)", send(t, c, req), 404, "")
}

func TestNginxUnreachableReplicasAreProblems(t *testing.T) {
	c := &http.Client{Timeout: 30 * time.Second}
	// POST /sale is an operation of the API: its 502 and 504 must match
	// what the OpenAPI description promises buyers.
	checker, err := spectest.New(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	checked := &http.Client{Timeout: 30 * time.Second, Transport: checker.Transport(t, nil)}
	tests := []struct {
		name      string
		addr      string
		status    int
		requestID string
	}{
		{"nothing listens", closedAddr(t), 502, "down-1"},
		{"connect times out", stuckAddr(t), 504, ""},
	}
	for _, tt := range tests {
		base := startNginxAt(t, tt.addr)
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			req, _ := http.NewRequest(method, base+"/sale", strings.NewReader(`{"product_id":"sku-1","quantity":1}`))
			req.Header.Set("Content-Type", "application/json")
			if tt.requestID != "" {
				req.Header.Set("X-Request-ID", tt.requestID)
			}
			client := c
			if method == http.MethodPost {
				client = checked
			}
			checkNginxProblem(t, fmt.Sprintf("%s /sale when %s", method, tt.name), send(t, client, req), tt.status, tt.requestID)
		}
	}
	for _, status := range []int{502, 504} {
		if !slices.Contains(checker.Seen(), spectest.Triple{Method: http.MethodPost, Path: "/sale", Status: status}) {
			t.Errorf("POST /sale %d was not checked against the OpenAPI description", status)
		}
	}
}

// TestNginxPassesTheReplicasOwnErrors: nginx replaces only what it says
// itself; a replica's problem (even a 413 or a 502) arrives as the replica
// sent it.
func TestNginxPassesTheReplicasOwnErrors(t *testing.T) {
	codes := []int{400, 413, 500, 502, 503, 504}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Instance", "replica")
		w.Header().Set("X-Request-ID", r.Header.Get("X-Request-ID"))
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"type":"urn:inventory:problem:from-replica","status":%d}`, code)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := startNginxAt(t, l.Addr().String())
	c := &http.Client{Timeout: 10 * time.Second}
	for _, code := range codes {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/status/%d", base, code), strings.NewReader("{}"))
		req.Header.Set("X-Request-ID", "pass-1")
		got := send(t, c, req)
		want := fmt.Sprintf(`{"type":"urn:inventory:problem:from-replica","status":%d}`, code)
		if got.status != code || string(got.body) != want || got.header.Get("X-Instance") != "replica" {
			t.Errorf("replica answers %d problem: through nginx %d %s (X-Instance %q), want it untouched: %s", code, got.status, got.body, got.header.Get("X-Instance"), want)
		}
		if ids := got.header.Values("X-Request-ID"); len(ids) != 1 || ids[0] != "pass-1" {
			t.Errorf("replica answers %d: X-Request-ID %q through nginx, want exactly [pass-1]", code, ids)
		}
	}
}

// TestNginxRequestIDRule: nginx keeps the caller's X-Request-ID only when it
// is 1-64 of A-Z a-z 0-9 . _ -; the upstream gets the id nginx chose, and the
// answer carries it exactly once even though the upstream echoes it too.
func TestNginxRequestIDRule(t *testing.T) {
	var seen = make(chan string, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := r.Header.Values("X-Request-ID")
		seen <- strings.Join(ids, "|")
		// Like a replica: echo the id it was given, plus one of its own.
		w.Header().Add("X-Request-ID", r.Header.Get("X-Request-ID"))
		w.Header().Add("X-Request-ID", "upstream-extra")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := startNginxAt(t, l.Addr().String())
	c := &http.Client{Timeout: 10 * time.Second}

	tests := []struct {
		name  string
		given []string
		keep  bool
	}{
		{"none", nil, false},
		{"safe", []string{"req-from-client-42"}, true},
		{"all the allowed characters", []string{"AZaz09._-"}, true},
		{"64 characters", []string{strings.Repeat("a", 64)}, true},
		{"65 characters", []string{strings.Repeat("a", 65)}, false},
		{"space", []string{"bad id"}, false},
		{"markup", []string{"<script>alert(1)</script>"}, false},
		{"quote", []string{`a"b`}, false},
		{"comma", []string{"a,b"}, false},
		{"non-ASCII", []string{"naïve"}, false},
		{"given twice", []string{"first-id", "second-id"}, false},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, base+"/healthz", nil)
		for _, v := range tt.given {
			req.Header.Add("X-Request-ID", v)
		}
		got := send(t, c, req)
		upstreamSaw := <-seen
		ids := got.header.Values("X-Request-ID")
		if len(ids) != 1 {
			t.Errorf("%s: X-Request-ID %q answered with %d X-Request-IDs %q, want exactly 1", tt.name, tt.given, len(ids), ids)
			continue
		}
		switch {
		case tt.keep && ids[0] != tt.given[0]:
			t.Errorf("%s: X-Request-ID %q answered %q, want it kept", tt.name, tt.given, ids[0])
		case !tt.keep && len(tt.given) != 2 && !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ids[0]):
			t.Errorf("%s: X-Request-ID %q answered %q, want nginx's 32-hex $request_id", tt.name, tt.given, ids[0])
		case !regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`).MatchString(ids[0]):
			t.Errorf("%s: X-Request-ID %q answered %q, want a safe id", tt.name, tt.given, ids[0])
		}
		if upstreamSaw != ids[0] {
			t.Errorf("%s: upstream saw X-Request-ID %q, the caller got %q; want the same single id", tt.name, upstreamSaw, ids[0])
		}
	}
}
