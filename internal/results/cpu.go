package results

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// cpuReport is the part of `loadtest cpu --json` (internal/cpuprof.Report)
// that records take; the field names are that JSON's contract.
type cpuReport struct {
	StartedAt string  `json:"started_at"`
	Commit    string  `json:"commit"`
	Clients   int     `json:"clients"`
	Seconds   float64 `json:"seconds_each"`
	Warmup    float64 `json:"warmup_seconds"`
	Replicas  int     `json:"replicas"`
	WorkDelay string  `json:"work_delay"`
	Fsync     bool    `json:"fsync"`
	Rows      []struct {
		Kind       string             `json:"kind"`
		Title      string             `json:"title"`
		Strategy   string             `json:"strategy"`
		Answers    int64              `json:"answers"`
		Expected   string             `json:"expected"`
		Unexpected int64              `json:"unexpected"`
		Statuses   map[string]int64   `json:"statuses"`
		PerSecond  float64            `json:"answers_per_s"`
		PerAnswer  map[string]float64 `json:"us_per_answer"`
		XHealthz   float64            `json:"x_healthz"`
	} `json:"rows"`
}

// cpuGroups are the record's columns of µs per answer: the group's key in
// the JSON and the column's title.
var cpuGroups = [][2]string{
	{"postgres", "Postgres"}, {"replicas", "both replicas"}, {"nginx", "nginx"}, {"redis", "Redis"},
	{"other", "other servers"}, {"generator", "load generator"}, {"fleet", "fleet, no generator"},
}

func fromCPU(data []byte) (Record, error) {
	var rep cpuReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return Record{}, err
	}
	if len(rep.Rows) == 0 {
		return Record{}, fmt.Errorf("no rows in it")
	}
	date, err := utcMinute(rep.StartedAt)
	if err != nil {
		return Record{}, err
	}
	fsync := "on"
	if !rep.Fsync {
		fsync = "off"
	}
	rec := Record{Date: date, Commit: rep.Commit, Series: "per-process",
		Setup: fmt.Sprintf("%d closed-loop clients, each on a keep-alive connection of its own, through nginx; each kind %gs measured after %gs of warm-up, one after the other on one fleet; "+
			"%d replicas (INVENTORY_WORK_DELAY=%s), Postgres with fsync %s. "+
			"µs of CPU per answer: each process's utime+stime (/proc/PID/stat) before and after the window, summed over its group with every process under it, "+
			"the postmaster's cutime+cstime counting the backends that exited; other servers are the lock backends' (etcd, ZooKeeper, Redlock's three Redis), idle here; "+
			"the load generator is the measuring process itself (Go's net/http client), not in the fleet's figure.",
			rep.Clients, rep.Seconds, rep.Warmup, rep.Replicas, rep.WorkDelay, fsync)}
	rec.Columns = []Column{{Key: "answer", Title: "answer"}, {Key: "answers_per_s", Title: "answers/s"}}
	for _, g := range cpuGroups {
		rec.Columns = append(rec.Columns, Column{Key: g[0], Title: g[1]})
	}
	rec.Columns = append(rec.Columns, Column{Key: "x_healthz", Title: "× `/healthz`"}, Column{Key: "other_answers", Title: "other answers"})
	for _, r := range rep.Rows {
		answer := r.Title
		if r.Kind == "sold-out" && r.Strategy != "" {
			answer += " (" + r.Strategy + ", the fleet default)"
		}
		row := Row{"answer": answer, "answers_per_s": math.Round(r.PerSecond)}
		for _, g := range cpuGroups {
			if v, ok := r.PerAnswer[g[0]]; ok {
				row[g[0]] = perAnswer(v)
			}
		}
		if r.XHealthz > 0 {
			row["x_healthz"] = round(r.XHealthz, 1)
		}
		if r.Unexpected > 0 {
			var parts []string
			for _, s := range slices.Sorted(maps.Keys(r.Statuses)) {
				if !statusIs(r.Expected, s) {
					parts = append(parts, fmt.Sprintf("%d × %s", r.Statuses[s], s))
				}
			}
			row["other_answers"] = strings.Join(parts, ", ")
		}
		rec.Rows = append(rec.Rows, row)
	}
	return rec, nil
}

// perAnswer rounds µs per answer as the table shows them: tenths below
// 10, whole microseconds above.
func perAnswer(v float64) float64 {
	if v < 10 {
		return round(v, 1)
	}
	return math.Round(v)
}

// statusIs reports whether status ("503") is the one want names ("503",
// "2xx").
func statusIs(want, status string) bool {
	if len(want) == 3 && strings.HasSuffix(want, "xx") {
		return strings.HasPrefix(status, want[:1])
	}
	return status == want
}
