// Package docs_test checks that the docs tell the truth about themselves:
// every table generated from docs/results is what its records give, every
// record is well formed and listed, and every link between the pages (and
// from them into the repository) leads somewhere, anchors included. It
// reads files only, so it needs no server.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"inventory/internal/results"
)

// TestDocsAreWrittenFromTheirRecords fails when a table between
// `<!-- results … -->` markers differs from what its records give: a
// figure edited in a doc instead of in docs/results, or a record appended
// without rewriting the docs.
func TestDocsAreWrittenFromTheirRecords(t *testing.T) {
	stale, err := results.UpdateDocs(".", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		t.Errorf("docs/%s: its generated tables differ from docs/results; run go run ./loadtest results", p)
	}
}

// TestEveryRecordsFileIsValidAndListed reads every record (a malformed
// one fails, naming its line) and wants each file in results/README.md's
// table, and each file that table names to exist.
func TestEveryRecordsFileIsValidAndListed(t *testing.T) {
	files, err := results.ReadDir("results")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no records in docs/results: is the test reading the right directory?")
	}
	readme, err := os.ReadFile("results/README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9-]+\\.jsonl)`").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]] = true
	}
	for name, rs := range files {
		if len(rs) == 0 {
			t.Errorf("results/%s holds no record", name)
		}
		if !listed[name] {
			t.Errorf("results/%s is not in results/README.md's table of files", name)
		}
	}
	for name := range listed {
		if _, ok := files[name]; !ok {
			t.Errorf("results/README.md names %s, which does not exist", name)
		}
	}
}

// TestLinksResolve follows every relative link of every page of docs/
// and of the README: the file or directory must exist, and an anchor must
// be a heading of the page it points into.
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "results/README.md", "../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, page := range pages {
		for _, l := range proseLines(t, page) {
			for _, m := range link.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d links to %s, which does not exist", page, l.n, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d links to an anchor of %s, which is not a page", page, l.n, target)
					continue
				}
				if !slices.Contains(anchors(t, path), anchor) {
					t.Errorf("%s:%d links to %s, but %s has no heading #%s (it has %s)", page, l.n, target, path, anchor, strings.Join(anchors(t, path), ", "))
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d links: is the test reading the pages right?", checked)
	}
}

// TestTheDocsNameWhatExists: every test, benchmark and fuzz target the
// docs name in code exists, every `make` target they give is in the
// Makefile, and every package a go command of theirs names is a
// directory. A test renamed or a target dropped fails here.
func TestTheDocsNameWhatExists(t *testing.T) {
	funcs := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`).FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	makeTarget := regexp.MustCompile(`(?:^|[\s(;&|])make\s+([A-Za-z0-9][A-Za-z0-9_.-]*)\b`)
	pkg := regexp.MustCompile(`(?:^|\s)\./((?:internal|cmd|loadtest|dashboards|nginx|deploy)[\w./-]*)`)
	for _, page := range pages {
		for _, c := range codeOf(t, page) {
			for _, m := range named.FindAllStringSubmatch(c.text, -1) {
				if !funcs[m[1]] && !strings.HasSuffix(m[1], "Test") {
					t.Errorf("%s:%d names %s, which no _test.go file declares", page, c.n, m[1])
				}
			}
			for _, m := range makeTarget.FindAllStringSubmatch(c.text, -1) {
				if !targets[m[1]] {
					t.Errorf("%s:%d gives make %s, which the Makefile has no target for", page, c.n, m[1])
				}
			}
			if !strings.HasPrefix(c.text, "go ") {
				continue
			}
			for _, m := range pkg.FindAllStringSubmatch(c.text, -1) {
				dir := filepath.Join("..", strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "/"))
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Errorf("%s:%d runs go on ./%s, which is not a directory", page, c.n, m[1])
				}
			}
		}
	}
}

// codeOf is a page's code: each line of its fenced blocks and each inline
// code span, with the line it is on.
func codeOf(t *testing.T, page string) []line {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	fenced := false
	span := regexp.MustCompile("`([^`]+)`")
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, line{i + 1, strings.TrimSpace(l)})
			continue
		}
		for _, m := range span.FindAllStringSubmatch(l, -1) {
			out = append(out, line{i + 1, m[1]})
		}
	}
	return out
}

func TestAnchorIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Gateway limits": "gateway-limits",
		"Postgres under Patroni (`--postgres-ha`)":            "postgres-under-patroni---postgres-ha",
		"Redis locks (`internal/lock/redislock`)":             "redis-locks-internallockredislock",
		"Reads beside the sales: do readers slow the buyers?": "reads-beside-the-sales-do-readers-slow-the-buyers",
		"How fast over 1,000 products?":                       "how-fast-over-1000-products",
		"The history check: every answer is true":             "the-history-check-every-answer-is-true",
		"What the fault matrix does, × 2":                     "what-the-fault-matrix-does--2",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// line is a line of a page with its number.
type line struct {
	n    int
	text string
}

// proseLines is a page's lines outside fenced code blocks, with inline
// code spans blanked: a link written as code is an example, not a link.
func proseLines(t *testing.T, page string) []line {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	fenced := false
	code := regexp.MustCompile("`[^`]*`")
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line{i + 1, code.ReplaceAllString(l, "``")})
		}
	}
	return out
}

// anchors is every heading anchor of a page, as GitHub makes them (a
// repeated heading gets -1, -2, …).
func anchors(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		a := anchor(strings.TrimLeft(l, "# "))
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor of a heading: lower case, every character
// but letters, digits, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
