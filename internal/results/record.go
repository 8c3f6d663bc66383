package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Record is one measured run: when, of what code, on what machine, by
// which command, and its figures as a table (Columns name the keys of
// Rows, in the order a doc shows them).
type Record struct {
	// Date is when the run started, UTC: "2006-01-02" when the hour is
	// unknown, else "2006-01-02T15:04Z". Records sort by it.
	Date string `json:"date"`
	// Commit is the revision measured (a short hash, "-dirty" when the
	// tree had changes); empty when the measurement named none.
	Commit string `json:"commit"`
	// Series names the measurement when a file holds several shapes of
	// it (lock-bench.jsonl: one series per backend); a doc's marker picks
	// the newest record of a series.
	Series  string  `json:"series,omitempty"`
	Machine Machine `json:"machine"`
	// Command reproduces the run, as typed from the repository's root.
	Command string `json:"command"`
	// Setup is what the command does not say: the fleet, the servers'
	// settings, how the figures were derived.
	Setup   string   `json:"setup,omitempty"`
	Columns []Column `json:"columns"`
	Rows    []Row    `json:"rows"`
	// Notes is what the figures showed when they were taken, in words.
	Notes string `json:"notes,omitempty"`
}

// Machine is what the figures depend on besides the code.
type Machine struct {
	Cores int    `json:"cores"`
	CPU   string `json:"cpu,omitempty"`
	OS    string `json:"os,omitempty"`
	// Load is the 1-minute load average around the run: one figure, or
	// the lowest and the highest seen. Empty when it was not read.
	Load []float64 `json:"load,omitempty"`
	// Beside is what else ran on the machine meanwhile ("nothing", "three
	// other builds").
	Beside string `json:"beside,omitempty"`
}

// Column is one column of a record's table.
type Column struct {
	Key   string `json:"key"`
	Title string `json:"title"`
	// Code shows the values as code (strategy and fault names).
	Code bool `json:"code,omitempty"`
}

// Row is one row of figures, by column key: numbers, strings (ranges
// such as "366–450", or words) or booleans.
type Row map[string]any

// dateLayouts are the forms Record.Date may take.
var dateLayouts = []string{"2006-01-02T15:04Z", "2006-01-02"}

// Time is the record's date as a time; ok is false when Date has neither
// form.
func (r Record) Time() (t time.Time, ok bool) {
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, r.Date); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// Validate says what is missing or inconsistent in r: every record must
// say when, on what machine and by which command, and every row's keys
// must be columns.
func (r Record) Validate() error {
	var errs []error
	if _, ok := r.Time(); !ok {
		errs = append(errs, fmt.Errorf("date %q is neither 2006-01-02 nor 2006-01-02T15:04Z", r.Date))
	}
	if r.Machine.Cores < 1 {
		errs = append(errs, errors.New("machine.cores missing"))
	}
	if strings.TrimSpace(r.Command) == "" {
		errs = append(errs, errors.New("command missing"))
	}
	if len(r.Columns) == 0 || len(r.Rows) == 0 {
		errs = append(errs, errors.New("no figures (columns and rows)"))
	}
	keys := map[string]bool{}
	for _, c := range r.Columns {
		if c.Key == "" || keys[c.Key] {
			errs = append(errs, fmt.Errorf("column key %q empty or repeated", c.Key))
		}
		keys[c.Key] = true
	}
	for i, row := range r.Rows {
		for k, v := range row {
			if !keys[k] {
				errs = append(errs, fmt.Errorf("row %d: key %q is not a column", i+1, k))
			}
			switch v.(type) {
			case float64, string, bool, nil:
			default:
				errs = append(errs, fmt.Errorf("row %d: %q is a %T, want a number, a string or a boolean", i+1, k, v))
			}
		}
	}
	return errors.Join(errs...)
}

// Read returns the records of one JSON Lines file, in file order. A line
// that is not a valid record fails the whole file, naming the line.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("results: %s:%d: %w", path, n, err)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("results: %s:%d: %w", path, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	return out, nil
}

// ReadDir returns every *.jsonl file of dir by its name ("batching.jsonl").
func ReadDir(dir string) (map[string][]Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	out := map[string][]Record{}
	for _, p := range paths {
		rs, err := Read(p)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(p)] = rs
	}
	return out, nil
}

// Append adds r as the last line of the JSON Lines file at path, creating
// it if need be. r must be valid.
func Append(path string, r Record) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("results: not appending to %s: %w", path, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("results: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: %s: %w", path, err)
	}
	return nil
}

// Newest returns the newest record of rs that passes keep: the latest
// Date, and of records with the same Date the one written last.
func Newest(rs []Record, keep func(Record) bool) (Record, bool) {
	best, found := Record{}, false
	var bestT time.Time
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		t, _ := r.Time()
		if !found || !t.Before(bestT) {
			best, bestT, found = r, t, true
		}
	}
	return best, found
}

// column returns r's column with key k.
func (r Record) column(k string) (Column, bool) {
	i := slices.IndexFunc(r.Columns, func(c Column) bool { return c.Key == k })
	if i < 0 {
		return Column{}, false
	}
	return r.Columns[i], true
}
