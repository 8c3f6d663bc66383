package api

import (
	"net/url"
	"testing"
)

// strategyParam reads what url.ParseQuery (the reference) reads, and fails
// where it fails, whatever the query.
func FuzzStrategyParam(f *testing.F) {
	for _, seed := range []string{
		"", "strategy=atomic", "strategy=", "strategy", "strategy=a&strategy=b", "strategy=a;b",
		"strategy=%zz", "strategy=re%64is", "strategy=a+b", "strategy=a=b", "x=1&strategy=atomic",
		"Strategy=atomic", "strategy=atomic&", "&strategy=atomic", "strategy=\x00", "strategy=ßtomic",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		first, given, err := strategyParam(rawQuery)
		query, wantErr := url.ParseQuery(rawQuery)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("strategyParam(%q) err = %v, url.ParseQuery's = %v", rawQuery, err, wantErr)
		}
		if err != nil {
			return // the caller refuses the request whatever else was read
		}
		values := query["strategy"]
		if given != len(values) || given > 0 && first != values[0] {
			t.Fatalf("strategyParam(%q) = %q, %d values; url.ParseQuery reads %q", rawQuery, first, given, values)
		}
	})
}
