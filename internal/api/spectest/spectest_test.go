package spectest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const spec = `
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /things/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, pattern: "^[a-z]+$"}}
    put:
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, additionalProperties: false, required: [n], properties: {n: {type: integer}}}
      responses:
        "200":
          description: ok
          headers:
            X-Request-ID: {required: true, schema: {type: string}}
          content:
            application/json:
              schema: {type: object, additionalProperties: false, required: [n], properties: {n: {type: integer}}}
        "400":
          description: bad
          headers:
            X-Request-ID: {required: true, schema: {type: string}}
          content:
            application/problem+json:
              schema: {$ref: "#/components/schemas/Problem"}
components:
  responses:
    NotFound:
      description: no route
      content:
        application/problem+json:
          schema: {$ref: "#/components/schemas/Problem"}
    MethodNotAllowed:
      description: no method
      content:
        application/problem+json:
          schema: {$ref: "#/components/schemas/Problem"}
  schemas:
    Problem:
      type: object
      required: [type, status]
      properties: {type: {type: string}, status: {type: integer}}
`

// errorList is a Reporter that keeps what it is told.
type errorList []string

func (e *errorList) Errorf(format string, args ...any) { *e = append(*e, fmt.Sprintf(format, args...)) }

func TestCheckFindsWhatBreaksTheDescription(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		status                   int
		contentType, answer      string
		wantErr                  string // "" for no error
	}{
		{"fine", "PUT", "/things/a", `{"n":1}`, 200, "application/json", `{"n":1}`, ""},
		{"a refused request refused", "PUT", "/things/a", `{"n":"x"}`, 400, "application/problem+json", `{"type":"bad","status":400}`, ""},
		{"a refused request sold", "PUT", "/things/a", `{"n":1,"extra":1}`, 200, "application/json", `{"n":1}`, "refuses the request"},
		{"bad path parameter accepted", "PUT", "/things/A1", `{"n":1}`, 200, "application/json", `{"n":1}`, "refuses the request"},
		{"undocumented field answered", "PUT", "/things/a", `{"n":1}`, 200, "application/json", `{"n":1,"m":2}`, "doesn't match"},
		{"undocumented status", "PUT", "/things/a", `{"n":1}`, 409, "application/problem+json", `{"type":"x","status":409}`, "status is not supported"},
		{"wrong content type", "PUT", "/things/a", `{"n":1}`, 200, "text/plain", `{"n":1}`, "Content-Type"},
		{"unrouted, 404 problem", "GET", "/nothing", ``, 404, "application/problem+json", `{"type":"nf","status":404}`, ""},
		{"wrong method, 405 problem", "GET", "/things/a", ``, 405, "application/problem+json", `{"type":"na","status":405}`, ""},
		{"unrouted, 200", "GET", "/nothing", ``, 200, "application/json", `{}`, "no such operation"},
		{"unrouted, not a problem", "GET", "/nothing", ``, 404, "text/plain", `404 page not found`, "content type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New([]byte(spec))
			if err != nil {
				t.Fatal(err)
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Set("X-Request-ID", "r1")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			})
			var errs errorList
			srv := httptest.NewServer(c.Handler(&errs, h))
			defer srv.Close()
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Errorf("%s %s answered %d %s: reported %q, want nothing", tt.method, tt.path, tt.status, tt.answer, errs)
			case tt.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0], tt.wantErr)):
				t.Errorf("%s %s answered %d %s: reported %q, want one report with %q", tt.method, tt.path, tt.status, tt.answer, errs, tt.wantErr)
			}
		})
	}
}

func TestUnseenListsWhatNoExchangeProduced(t *testing.T) {
	c, err := New([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-ID", "r1")
		_, _ = io.WriteString(w, `{"n":1}`)
	})
	var errs errorList
	srv := httptest.NewServer(c.Handler(&errs, ok))
	defer srv.Close()
	req, _ := http.NewRequest("PUT", srv.URL+"/things/a", strings.NewReader(`{"n":1}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	put400 := Triple{"PUT", "/things/{id}", 400}
	if got := c.Unseen(nil); len(got) != 1 || got[0] != put400 || len(errs) > 0 {
		t.Errorf("Unseen() after one 200 = %v (reports %q), want [%v]", got, errs, put400)
	}
	if got := c.Unseen(map[Triple]string{put400: "tested elsewhere"}); len(got) != 0 {
		t.Errorf("Unseen(excluding %v) = %v, want none", put400, got)
	}
}
