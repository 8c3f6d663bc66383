package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheDocsCommandsParse reads every load tester command the docs and
// the README give (code blocks and inline code, generated tables'
// commands included) and parses its flags as the load tester would: a
// flag renamed or removed fails here instead of in a reader's terminal.
// Commands with a placeholder (…, <the fleet's postgres>, N) or for an
// unmerged branch are skipped; what each names must still exist.
func TestTheDocsCommandsParse(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	seen := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range commands(string(b)) {
			args, ok := loadtestArgs(cmd)
			if !ok {
				continue
			}
			seen++
			if err := parseCommand(args); err != nil {
				t.Errorf("%s: `%s` does not parse: %v", filepath.Base(page), cmd, err)
			}
		}
	}
	if seen < 20 {
		t.Errorf("parsed %d load tester commands in the docs: is the test reading them right?", seen)
	}
}

// parseCommand parses a load tester command line's arguments (after
// `go run ./loadtest`) without running anything.
func parseCommand(args []string) error {
	switch {
	case len(args) > 0 && args[0] == "faults":
		_, err := parseFaultFlags(args[1:], io.Discard)
		return ignoreHelp(err)
	case len(args) > 0 && args[0] == "cpu":
		_, err := parseCPUFlags(args[1:], io.Discard)
		return ignoreHelp(err)
	case len(args) > 0 && args[0] == "results":
		return parseResultsCommand(args[1:])
	case len(args) > 0 && args[0] == "stampede":
		_, err := parseStampedeFlags(args[1:], io.Discard)
		return ignoreHelp(err)
	default:
		_, err := parseFlags(args, io.Discard)
		return ignoreHelp(err)
	}
}

// parseResultsCommand checks a `results` command: its kinds, and the
// load tester command it records.
func parseResultsCommand(args []string) error {
	if len(args) == 0 || args[0] != "record" {
		return nil // results, results -h, results -check, results add: no flags of the load tester
	}
	i := slices.Index(args, "--")
	if i < 0 {
		return errors.New("record without --")
	}
	head := args[1:i]
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o recordFlags
	o.define(fs, false)
	pos, err := parseInterleaved(fs, head)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("record wants one KIND")
	}
	if _, err := kindsNamed(pos[0]); err != nil {
		return err
	}
	return parseCommand(args[i+1:])
}

func ignoreHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commands is every line of a fenced code block (a line ending in \ joined
// with the next) and every inline code span of a page.
func commands(page string) []string {
	var out []string
	var prose strings.Builder
	fenced, cont := false, ""
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose.WriteString(l + "\n")
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cont += strings.TrimSuffix(l, `\`)
			continue
		}
		out = append(out, cont+l)
		cont = ""
	}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(prose.String(), -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// loadtestArgs is the arguments of a `go run ./loadtest …` or
// `bin/loadtest …` command, its comment dropped; false for anything
// else, and for a command with a placeholder.
func loadtestArgs(cmd string) ([]string, bool) {
	cmd, _, _ = strings.Cut(cmd, " #")
	cmd = strings.TrimSpace(cmd)
	var rest string
	switch {
	case strings.HasPrefix(cmd, "go run ./loadtest "):
		rest = strings.TrimPrefix(cmd, "go run ./loadtest ")
	case strings.HasPrefix(cmd, "bin/loadtest "):
		rest = strings.TrimPrefix(cmd, "bin/loadtest ")
	default:
		return nil, false
	}
	if strings.ContainsAny(rest, "…<>[]") || strings.Contains(rest, "bucket") || strings.HasSuffix(rest, ",") {
		return nil, false
	}
	return shellSplit(rest), true
}

// shellSplit splits a command line at spaces, keeping single-quoted
// words whole (what the docs' commands use).
func shellSplit(s string) []string {
	var out []string
	var word strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, word.String())
	}
	return out
}
