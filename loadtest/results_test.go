package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"inventory/internal/load"
	"inventory/internal/report"
	"inventory/internal/results"
)

// TestResultsAddAppendsARunAndRewritesTheDocs: what `--json` wrote becomes
// a record with the machine, the load and the command, the doc's table
// follows it, and -check then finds nothing to change until the doc is
// edited by hand.
func TestResultsAddAppendsARunAndRewritesTheDocs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "speed.md")
	if err := os.WriteFile(doc, []byte("# Speed\n\n<!-- results hot-product.jsonl columns=strategy,req_per_s,verdict -->\n<!-- /results -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run1 := filepath.Join(dir, "run.json")
	b, err := json.Marshal(report.Report{StartedAt: "2026-11-29T10:00:00Z", Commit: "abc1234", Runs: 1, Results: []load.Result{
		{Run: 1, Strategy: "atomic", Safe: true, OK: 100, Seconds: 0.5, Throughput: 300, Verdict: "SAFE"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run1, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = run(ctx, []string{"results", "add", "-docs", dir, "-command", "go run ./loadtest --strategies atomic", "-beside", "nothing", "-load", "0.5", "hot-product", run1}, &out, &out)
	if err != nil {
		t.Fatalf("results add: %v\n%s", err, out.String())
	}
	rs, err := results.Read(filepath.Join(dir, "results", "hot-product.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Command != "go run ./loadtest --strategies atomic" || rs[0].Machine.Beside != "nothing" ||
		len(rs[0].Machine.Load) != 1 || rs[0].Machine.Load[0] != 0.5 || rs[0].Machine.Cores < 1 || rs[0].Date != "2026-11-29T10:00Z" {
		t.Errorf("the appended record = %+v", rs)
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "| `atomic` | 300 | SAFE |") || !strings.Contains(out.String(), "rewrote the tables of "+doc) {
		t.Errorf("speed.md after results add =\n%s\noutput:\n%s", got, out.String())
	}

	if err := run(ctx, []string{"results", "-check", "-docs", dir}, &out, &out); err != nil {
		t.Errorf("results -check right after add: %v", err)
	}
	edited := strings.Replace(string(got), "| 300 |", "| 3000 |", 1)
	if err := os.WriteFile(doc, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, []string{"results", "-check", "-docs", dir}, &out, &out); err == nil || !strings.Contains(out.String(), doc+": its tables differ from the records") {
		t.Errorf("results -check after a figure was edited in the doc = %v\n%s", err, out.String())
	}
	if b, _ := os.ReadFile(doc); string(b) != edited {
		t.Error("results -check changed the doc")
	}
	if err := run(ctx, []string{"results", "-docs", dir}, &out, &out); err != nil {
		t.Fatalf("results: %v", err)
	}
	if b, _ := os.ReadFile(doc); string(b) != string(got) {
		t.Errorf("results did not rewrite the edited figure:\n%s", b)
	}
}

func TestResultsRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"results", "add", "-docs", dir, "hot-product", "run.json"}, // no -command
		{"results", "add", "-docs", dir, "-command", "c", "speed", "run.json"},
		{"results", "add", "-docs", dir, "-command", "c", "hot-product"},
		{"results", "record", "-docs", dir, "hot-product"},                         // no -- and flags
		{"results", "record", "-docs", dir, "--", "--stock", "10"},                 // no kind
		{"results", "record", "-docs", dir, "fault-matrix", "--", "--stock", "10"}, // a matrix comes from loadtest faults
		{"results", "record", "-docs", dir, "hot-product", "--", "faults"},
		{"results", "record", "-docs", dir, "hot-product", "--", "--json", "x.json"},
		{"results", "record", "-docs", dir, "hot-product,speed", "--", "--stock", "10"},
		{"results", "-nope"},
		{"results", "extra"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands wrote %d files into the docs directory", len(entries))
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"--strategies", "a,b", "--url", "http://x:1/?a=1&b=2", "--setup", "it's", ""})
	want := `--strategies a,b --url 'http://x:1/?a=1&b=2' --setup 'it'\''s' ''`
	if got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

// TestACommitDirtyOnlyUnderDocsIsClean: a run made while only docs/
// differed (the records of the run before) measured the commit's code.
func TestACommitDirtyOnlyUnderDocsIsClean(t *testing.T) {
	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("main.go", "package main\n")
	write("docs/results/x.jsonl", "{}\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	docs := filepath.Join(root, "docs")

	if c, ok := docsOnlyDirty(docs, "abc123"); ok || c != "abc123" {
		t.Errorf("docsOnlyDirty(a clean commit) = %q, %v", c, ok)
	}
	write("docs/results/x.jsonl", "{}\n{}\n")
	if c, ok := docsOnlyDirty(docs, "abc123-dirty"); !ok || c != "abc123" {
		t.Errorf("docsOnlyDirty(a tree dirty under docs/ only) = %q, %v; want abc123, true", c, ok)
	}
	write("main.go", "package main // changed\n")
	if c, ok := docsOnlyDirty(docs, "abc123-dirty"); ok || c != "abc123-dirty" {
		t.Errorf("docsOnlyDirty(a tree whose code changed) = %q, %v; want abc123-dirty, false", c, ok)
	}
}
