package verdict

import (
	"testing"
	"time"
)

func TestOverlaps(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	h := func(inst string, fence int64, from int, to *time.Time) Hold {
		return Hold{Strategy: "redis", Instance: inst, Fence: fence, Start: *at(from), End: to}
	}
	cases := []struct {
		name  string
		holds []Hold
		want  int
	}{
		{"none", nil, 0},
		{"one after another", []Hold{h("a", 1, 0, at(10)), h("b", 2, 10, at(20)), h("a", 3, 25, at(30))}, 0},
		{"a paused holder under the next", []Hold{h("a", 1, 0, at(2000)), h("b", 2, 1000, at(1010)), h("b", 3, 1020, at(1030))}, 2},
		{"out of order", []Hold{h("b", 2, 5, at(15)), h("a", 1, 0, at(10))}, 1},
		{"still open counts until now", []Hold{h("a", 1, 0, nil), h("b", 2, 50, at(60))}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Overlaps(c.holds, t0.Add(time.Second))
			if len(got) != c.want {
				t.Errorf("overlaps = %d %v, want %d", len(got), got, c.want)
			}
		})
	}
}
