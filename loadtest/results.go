package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"inventory/internal/results"
)

// runResults is `loadtest results`: the measured runs under docs/results
// and the doc tables made from them (internal/results).
//
//	loadtest results [-check]                        rewrite (or check) the tables of docs/*.md
//	loadtest results record [flags] KIND -- ARGS…    run `loadtest ARGS… --json`, append it as a KIND record, rewrite the tables
//	loadtest results add [flags] KIND FILE.json      append what an earlier --json wrote, rewrite the tables
func runResults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "record":
			return resultsRecord(ctx, args[1:], stdout, stderr)
		case "add":
			return resultsAdd(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("loadtest results", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { resultsUsage(fs) }
	check := fs.Bool("check", false, "change nothing: exit 1 naming each doc whose tables differ from the records")
	docs := fs.String("docs", "", "the docs directory (default: docs/ of the repository the working directory is in)")
	if err := parse(fs, args); err != nil {
		return err
	}
	dir, err := docsDir(*docs)
	if err != nil {
		return err
	}
	return updateDocs(dir, !*check, stdout)
}

func resultsUsage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `Usage:
  loadtest results [-check]                      rewrite the generated tables of docs/*.md from docs/results/*.jsonl
  loadtest results record [flags] KIND -- ARGS…  run "loadtest ARGS… --json FILE", append the run to docs/results/KIND.jsonl, rewrite the tables
  loadtest results add [flags] KIND FILE.json    append what an earlier --json wrote (-command says how it was run)

KIND may be a comma-separated list: one run of "--products N --ceilings" is
both a many-products and a ceilings record. A run that fails is not recorded.

KINDs:
`)
	for _, k := range results.Kinds {
		fmt.Fprintf(fs.Output(), "  %-16s from %s: %s\n", strings.TrimSuffix(k.File, ".jsonl"), k.From, k.Does)
	}
	fmt.Fprint(fs.Output(), "\nFlags:\n")
	fs.PrintDefaults()
}

// recordFlags are the flags record and add share: what a record says
// that the run's JSON does not.
type recordFlags struct {
	setup, beside, series, docs, command string
	load                                 float64
}

func (o *recordFlags) define(fs *flag.FlagSet, add bool) {
	fs.StringVar(&o.setup, "setup", "", "what the command does not say (the fleet, settings, how a figure was derived)")
	fs.StringVar(&o.beside, "beside", "", "what else ran on the machine meanwhile, e.g. \"nothing\" or \"a make test\"")
	fs.StringVar(&o.series, "series", "", "the series the record belongs to, when its file holds several (default: the kind's own, e.g. fault-matrix's \"matrix\")")
	fs.StringVar(&o.docs, "docs", "", "the docs directory (default: docs/ of the repository the working directory is in)")
	if add {
		fs.StringVar(&o.command, "command", "", "the command that wrote the JSON, as typed from the repository's root (required)")
		fs.Float64Var(&o.load, "load", -1, "the 1-minute load average before the run (default: now's)")
	}
}

func resultsRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	head, tail := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		head, tail = args[:i], args[i+1:]
	}
	var o recordFlags
	fs := flag.NewFlagSet("loadtest results record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { resultsUsage(fs) }
	o.define(fs, false)
	pos, err := parseInterleaved(fs, head)
	if err != nil {
		return err
	}
	if len(pos) != 1 || len(tail) == 0 {
		return fmt.Errorf("%w: results record wants KIND -- LOADTEST-ARGS…, e.g. results record batching -- --ceilings --strategies batch,atomic", errUsage)
	}
	kinds, err := kindsNamed(pos[0])
	if err != nil {
		return err
	}
	for _, kind := range kinds {
		if kindCommand(kind) != subcommandOf(tail) {
			return fmt.Errorf("%w: %s records come from %s", errUsage, strings.TrimSuffix(kind.File, ".jsonl"), kind.From)
		}
	}
	if slices.ContainsFunc(tail, func(a string) bool {
		return a == "--json" || a == "-json" || strings.HasPrefix(a, "--json=") || strings.HasPrefix(a, "-json=")
	}) {
		return fmt.Errorf("%w: results record writes the JSON itself: leave --json out", errUsage)
	}
	dir, err := docsDir(o.docs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "loadtest-record-*.json")
	if err != nil {
		return fmt.Errorf("results record: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("results record: %w", err)
	}
	load := results.LoadAverage() // before the run: what else loads the machine
	// The run is this program again, in a process of its own, as the
	// command it records would be typed.
	cmd := exec.CommandContext(ctx, self, append(slices.Clone(tail), "--json", tmp.Name())...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Interrupted, the run stops the fleet it started; a kill would leave it.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the run failed, so it was not recorded (append its --json with `loadtest results add` if it should be): %w", err)
	}
	data, err := os.ReadFile(tmp.Name())
	if err != nil {
		return fmt.Errorf("results record: %w", err)
	}
	return appendRecords(kinds, data, "go run ./loadtest "+shellJoin(tail), load, o, dir, stdout)
}

// kindCommand is the load tester's subcommand whose --json kind reads
// ("faults", "cpu"); "" for the load tester's own.
func kindCommand(kind results.Kind) string {
	if f := strings.Fields(strings.TrimPrefix(kind.From, "loadtest")); len(f) > 0 && !strings.HasPrefix(f[0], "-") {
		return f[0]
	}
	return ""
}

// subcommandOf is the subcommand args run ("faults") when some kind's
// records come from it; "" for the load tester's own run.
func subcommandOf(args []string) string {
	for _, k := range results.Kinds {
		if c := kindCommand(k); c != "" && len(args) > 0 && args[0] == c {
			return c
		}
	}
	return ""
}

func resultsAdd(args []string, stdout, stderr io.Writer) error {
	var o recordFlags
	fs := flag.NewFlagSet("loadtest results add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { resultsUsage(fs) }
	o.define(fs, true)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || strings.TrimSpace(o.command) == "" {
		return fmt.Errorf("%w: results add wants -command \"…\" KIND FILE.json", errUsage)
	}
	kinds, err := kindsNamed(pos[0])
	if err != nil {
		return err
	}
	dir, err := docsDir(o.docs)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pos[1])
	if err != nil {
		return fmt.Errorf("results add: %w", err)
	}
	load := results.LoadAverage()
	if o.load >= 0 {
		load = []float64{o.load}
	}
	return appendRecords(kinds, data, o.command, load, o, dir, stdout)
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments (record KIND -beside x, as well as record -beside x KIND) and
// returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// kindsNamed is the kinds of a comma-separated list ("many-products,ceilings"):
// one run can be recorded as several kinds.
func kindsNamed(list string) ([]results.Kind, error) {
	var kinds []results.Kind
	for _, name := range strings.Split(list, ",") {
		k, err := results.KindNamed(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// appendRecords turns a run's JSON into a record of each kind, appends
// them, and rewrites the docs' tables. Every record is made before any is
// appended, so a run that does not fit one kind appends none.
func appendRecords(kinds []results.Kind, data []byte, command string, load []float64, o recordFlags, dir string, stdout io.Writer) error {
	var recs []results.Record
	for _, kind := range kinds {
		rec, err := kind.Convert(data)
		if err != nil {
			return err
		}
		if c, ok := docsOnlyDirty(dir, rec.Commit); ok {
			rec.Commit = c
			rec.Setup = strings.TrimSpace("The working tree differed from this commit only under docs/. " + rec.Setup)
		}
		rec.Machine = results.ThisMachine()
		rec.Machine.Load, rec.Machine.Beside = load, o.beside
		rec.Command = command
		if o.series != "" {
			rec.Series = o.series
		}
		if o.setup != "" {
			rec.Setup = strings.TrimSpace(strings.Join([]string{o.setup, rec.Setup}, " "))
		}
		if err := rec.Validate(); err != nil {
			return fmt.Errorf("results: %s: %w", kind.File, err)
		}
		recs = append(recs, rec)
	}
	for i, rec := range recs {
		path := filepath.Join(dir, "results", kinds[i].File)
		if err := results.Append(path, rec); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "recorded the run of %s in %s\n", rec.Date, path)
	}
	return updateDocs(dir, true, stdout)
}

// docsOnlyDirty is commit without its "-dirty" when what the working tree
// changes is only under docs/ (a record appended, a page rewritten): the
// code measured is the commit's. ok is false when commit is clean, or the
// code differs, or git cannot say.
func docsOnlyDirty(docs, commit string) (string, bool) {
	clean, dirty := strings.CutSuffix(commit, "-dirty")
	if !dirty {
		return commit, false
	}
	root := filepath.Dir(docs)
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":(exclude)"+filepath.Base(docs)).Output()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		return commit, false
	}
	return clean, true
}

// updateDocs rewrites (write) or checks the docs' tables and says which
// changed; checking, a stale doc is an error.
func updateDocs(dir string, write bool, stdout io.Writer) error {
	stale, err := results.UpdateDocs(dir, write)
	if err != nil {
		return err
	}
	for _, p := range stale {
		if write {
			fmt.Fprintf(stdout, "rewrote the tables of %s\n", p)
		} else {
			fmt.Fprintf(stdout, "%s: its tables differ from the records\n", p)
		}
	}
	if !write && len(stale) > 0 {
		return errors.New("docs out of date with docs/results: run go run ./loadtest results")
	}
	return nil
}

// docsDir is dir, or docs/ of the module the working directory is in.
func docsDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "docs"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("results: no go.mod above %s: give -docs", wd)
		}
	}
}

// shellJoin writes args as a POSIX shell needs them typed.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
