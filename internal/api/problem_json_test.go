package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendJSON writes what encoding/json's Encoder would, byte for byte.
func FuzzProblemJSON(f *testing.F) {
	for _, seed := range []string{
		"", "/sale", "sold out", `a"b\c`, "<script>&</script>", "tab\tnew\nline\rcr\bbs\fff\x00\x1f\x7f",
		"ünïcödé ✓ 𝄞", "\u2028\u2029", "bad \xff utf-8 \xe2\x82", "/products/%ZZ/sale",
	} {
		f.Add(seed, seed+"!", 409, seed == "")
	}
	f.Fuzz(func(t *testing.T, text, path string, status int, breach bool) {
		p := problem{Type: problemTypePrefix + text, Title: text, Status: status, Detail: text,
			Instance: path, RequestID: text, LockBreach: breach}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(p); err != nil {
			t.Fatal(err)
		}
		if got := p.appendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendJSON(%+v)\n got %s\nwant %s", p, got, want.Bytes())
		}
	})
}
