package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/internal/api"
	"inventory/internal/client"

	"inventory/internal/testenv"
)

// The edge of the real stack: nginx's body limit and problem answers, the
// request id rule through nginx and on a replica, and what a restock refuses.
// The nginx package tests the same config against stand-in upstreams,
// including unreachable ones (502/504).

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// edgeAnswer is one HTTP answer.
type edgeAnswer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// edgeDo sends a request by hand: these tests are about raw HTTP (bodies
// over the limit, headers the client never sends, nginx's own answers).
func edgeDo(t *testing.T, method, url, token string, body io.Reader, header ...string) edgeAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %.100s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := edgeAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// checkProblem checks that a is a problem+json answer with status and slug,
// carrying exactly one X-Request-ID, which the body names too.
func checkProblem(t *testing.T, what string, a edgeAnswer, status int, slug string) {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" || a.body["type"] != "urn:inventory:problem:"+slug {
		t.Errorf("%s = %d %s %.300s, want %d application/problem+json %s", what, a.status, a.header.Get("Content-Type"), a.raw, status, slug)
		return
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, a.header.Get("Cache-Control"))
	}
	ids := a.header.Values("X-Request-ID")
	if len(ids) != 1 || a.body["request_id"] != ids[0] {
		t.Errorf("%s: X-Request-ID headers %q, problem request_id %v; want exactly one, the same", what, ids, a.body["request_id"])
	}
}

func TestEdge(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f, err := Start(context.Background(), Options{Replicas: 2, Binary: binary, NoFsync: true})
	if err != nil {
		t.Fatalf("Start(2 replicas) = %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	token := f.AdminToken
	if p, err := f.Client().Restock(context.Background(), "sku-edge", client.RestockRequest{Quantity: 5, Name: "Hot thing"}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-edge = %+v, %v; want it created", p, err)
	}
	unchanged := func(t *testing.T, after string) {
		t.Helper()
		p, err := f.Client().Product(context.Background(), "sku-edge")
		if err != nil || p.Quantity != 5 || p.Name != "Hot thing" || p.Round != 1 || p.Sold != 0 {
			t.Errorf("after %s: GET /products/sku-edge = %+v, %v; want quantity 5, name \"Hot thing\", round 1, sold 0", after, p, err)
		}
	}

	t.Run("BodyLimit", func(t *testing.T) {
		sale := func(n int) io.Reader {
			return strings.NewReader(`{"product_id":"sku-edge","quantity":1,"pad":"` + strings.Repeat("x", n) + `"}`)
		}
		a := edgeDo(t, "POST", f.URL+"/sale", "", sale(8<<20))
		checkProblem(t, "POST /sale with 8 MiB through nginx", a, 413, "body-too-large")
		if inst := a.header.Get("X-Instance"); inst != "" {
			t.Errorf("POST /sale with 8 MiB through nginx was answered by replica %s, want nginx itself (the body must not reach a replica)", inst)
		}
		if strings.Contains(strings.ToLower(string(a.raw)), "nginx") || strings.Contains(string(a.raw), "<html") {
			t.Errorf("POST /sale with 8 MiB through nginx: body %s, want no nginx page or name", a.raw)
		}
		// Over the replicas' 4 KiB but under nginx's limit: the replica's own 413 passes through.
		a = edgeDo(t, "POST", f.URL+"/sale", "", sale(10<<10))
		checkProblem(t, "POST /sale with 10 KiB through nginx", a, 413, "body-too-large")
		if !strings.HasPrefix(a.header.Get("X-Instance"), "inventory-") {
			t.Errorf("POST /sale with 10 KiB through nginx: X-Instance %q, want the replica's own answer", a.header.Get("X-Instance"))
		}
		// A replica on its own refuses it too.
		a = edgeDo(t, "POST", f.Replicas[0].URL+"/sale", "", sale(8<<20))
		checkProblem(t, "POST /sale with 8 MiB to inventory-1 directly", a, 413, "body-too-large")
		unchanged(t, "refused oversized sales")
	})

	t.Run("RequestID", func(t *testing.T) {
		tests := []struct {
			name  string
			given []string
			keep  bool
		}{
			{"none", nil, false},
			{"safe", []string{"edge-req.42_A"}, true},
			{"64 characters", []string{strings.Repeat("r", 64)}, true},
			{"65 characters", []string{strings.Repeat("r", 65)}, false},
			{"space", []string{"bad id"}, false},
			{"markup", []string{"<b>id</b>"}, false},
			{"quote and brace", []string{`a"}b`}, false},
			{"non-ASCII", []string{"ïd"}, false},
		}
		for _, target := range []struct{ name, url string }{{"nginx", f.URL}, {"inventory-1 directly", f.Replicas[0].URL}} {
			for _, tt := range tests {
				var header []string
				for _, v := range tt.given {
					header = append(header, "X-Request-ID", v)
				}
				// The replica's 404 problem names the id the replica used.
				what := fmt.Sprintf("%s, X-Request-ID %s: GET /products/no-such-product", target.name, tt.name)
				a := edgeDo(t, "GET", target.url+"/products/no-such-product", "", nil, header...)
				checkProblem(t, what, a, 404, "product-not-found")
				id := a.header.Get("X-Request-ID")
				switch {
				case tt.keep && id != tt.given[0]:
					t.Errorf("%s: X-Request-ID %q, want the caller's %q kept", what, id, tt.given[0])
				case !tt.keep && !hex32.MatchString(id):
					t.Errorf("%s: X-Request-ID %q, want a new 32-hex id", what, id)
				}
				// A success carries exactly one too.
				a = edgeDo(t, "GET", target.url+"/healthz", "", nil, header...)
				if ids := a.header.Values("X-Request-ID"); a.status != 200 || len(ids) != 1 || (tt.keep && ids[0] != tt.given[0]) {
					t.Errorf("%s, X-Request-ID %s: GET /healthz = %d with X-Request-IDs %q, want 200 with exactly one (the caller's when safe)", target.name, tt.name, a.status, ids)
				}
			}
		}
	})

	t.Run("RestockNameMustBeText", func(t *testing.T) {
		bad := []struct{ name, body string }{
			{"a NUL", `{"quantity":7,"name":"Hot\u0000thing"}`},
			{"an escape", `{"quantity":7,"name":"\u001b[31mred"}`},
			{"a newline", `{"quantity":7,"name":"Hot\nthing"}`},
			{"a DEL", `{"quantity":7,"name":"Hot\u007fthing"}`},
			{"a C1 control", `{"quantity":7,"name":"Hot\u0085thing"}`},
			{"invalid UTF-8", "{\"quantity\":7,\"name\":\"Hot \xff thing\"}"},
		}
		for _, tt := range bad {
			for _, target := range []struct{ name, url string }{{"nginx", f.URL}, {"inventory-2 directly", f.Replicas[1].URL}} {
				a := edgeDo(t, "PUT", target.url+"/products/sku-edge", token, strings.NewReader(tt.body))
				checkProblem(t, fmt.Sprintf("PUT /products/sku-edge with %s in the name via %s", tt.name, target.name), a, 400, "malformed-request")
			}
			unchanged(t, "a restock with "+tt.name+" in the name")
		}
		// Text that is not ASCII is still a fine name.
		const name = "Ünïcødé – “hot” ✓"
		if p, err := f.Client().Restock(context.Background(), "sku-edge-2", client.RestockRequest{Quantity: 3, Name: name}); err != nil || p.Round != 1 || p.Name != name {
			t.Errorf("PUT /products/sku-edge-2 with name %q = %+v, %v; want it created with the name kept", name, p, err)
		}
	})

	t.Run("DocsOffline", func(t *testing.T) {
		a := edgeDo(t, "GET", f.URL+"/openapi.yaml", "", nil)
		if a.status != 200 || a.header.Get("Content-Type") != "application/yaml" || !bytes.Equal(a.raw, api.OpenAPI) {
			t.Errorf("GET /openapi.yaml through nginx = %d %s (%d bytes), want 200 application/yaml, the embedded description", a.status, a.header.Get("Content-Type"), len(a.raw))
		}
		for _, path := range []string{"/docs"} { // no /docs/: a trailing-slash path (see api.docsHandler)
			a := edgeDo(t, "GET", f.URL+path, "", nil)
			if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
				t.Fatalf("GET %s through nginx = %d %s, want 200 text/html", path, a.status, a.header.Get("Content-Type"))
			}
			// Everything the page loads comes from the fleet itself.
			refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllSubmatch(a.raw, -1)
			if len(refs) < 3 {
				t.Errorf("GET %s through nginx: the page loads %d files, want its scripts and styles", path, len(refs))
			}
			for _, ref := range refs {
				asset := string(ref[1])
				if !strings.HasPrefix(asset, "/docs/") {
					t.Errorf("GET %s through nginx: the page loads %q, want a file under /docs/ (no internet)", path, asset)
					continue
				}
				if a := edgeDo(t, "GET", f.URL+asset, "", nil); a.status != 200 || len(a.raw) == 0 {
					t.Errorf("GET %s through nginx = %d with %d bytes, want 200 with the file", asset, a.status, len(a.raw))
				}
			}
		}
	})

	// Last: it leaves the fleet without replicas.
	t.Run("ReplicasGone", func(t *testing.T) {
		for _, r := range f.Replicas {
			if err := syscall.Kill(r.Pid(), syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL %s: %v", r.Instance, err)
			}
		}
		testenv.WaitFor(t, "both replicas to exit", 15*time.Second, func() bool { return f.Replicas[0].Exited() && f.Replicas[1].Exited() })
		a := edgeDo(t, "POST", f.URL+"/sale", "", strings.NewReader(`{"product_id":"sku-edge","quantity":1}`), "Idempotency-Key", "gone-1")
		checkProblem(t, "POST /sale through nginx with no replica up", a, 502, "bad-gateway")
		if a.header.Get("Retry-After") != "" || !strings.Contains(string(a.raw), "Idempotency-Key") {
			t.Errorf("POST /sale with no replica up: Retry-After %q, body %s; want none, and the advice to retry with the same Idempotency-Key", a.header.Get("Retry-After"), a.raw)
		}
	})
}
