// Package inventory_test checks that the README tells the truth about the
// commands and endpoints it names: every make target, command-line flag,
// route and environment variable in it exists, and every route and every
// variable of the service is in it (these read the sources, need no
// server and run in a blink); its first ten minutes run word for word on a
// real fleet (readme_fleet_test.go, the e2e tier); and make help lists
// the Makefile's targets (makefile_test.go).
package inventory_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// readmeLine is a piece of the README's code (an inline `span` or a line of
// a fenced block) with the line it is on, for the failure message.
type readmeLine struct {
	n    int
	text string
}

// readmeCode returns the README's code: fenced blocks line by line, and
// inline code spans. Prose outside code names nothing this test checks.
func readmeCode(t *testing.T) []readmeLine {
	t.Helper()
	return markdownCode(t, "README.md")
}

// markdownCode returns a Markdown file's code, as readmeCode does.
func markdownCode(t *testing.T, path string) []readmeLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeLine
	fenced := false
	inline := regexp.MustCompile("`([^`]+)`")
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, readmeLine{i + 1, line})
			continue
		}
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			out = append(out, readmeLine{i + 1, m[1]})
		}
	}
	return out
}

func TestReadmeMakeTargetsExist(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	// "make fleet" and "make demo DEMO_ARGS='…'": the word after make,
	// unless it is a variable assignment or a flag.
	re := regexp.MustCompile(`(?:^|[\s(;&|])make\s+([A-Za-z0-9][A-Za-z0-9_.-]*)\b`)
	seen := 0
	for _, l := range readmeCode(t) {
		for _, m := range re.FindAllStringSubmatch(l.text, -1) {
			seen++
			if !targets[m[1]] {
				t.Errorf("README.md:%d names `make %s`, but the Makefile has no target %q", l.n, m[1], m[1])
			}
		}
	}
	if seen == 0 {
		t.Error("found no make command in README.md: is the test reading it right?")
	}
}

// definedFlags returns the flags defined with package flag's FlagSet
// methods (fs.String("name", …), fs.IntVar(&v, "name", …), …) in the
// non-test Go files under dirs.
func definedFlags(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	// The argument index of the flag's name, by method.
	nameArg := map[string]int{
		"String": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Bool": 0, "Duration": 0, "Float64": 0, "Func": 0, "BoolFunc": 0,
		"StringVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1, "BoolVar": 1, "DurationVar": 1, "Float64Var": 1,
		"Var": 1, "TextVar": 1,
	}
	flags := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				i, ok := nameArg[sel.Sel.Name]
				if !ok || len(call.Args) <= i {
					return true
				}
				if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil {
						flags[name] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return flags
}

func TestReadmeFlagsExist(t *testing.T) {
	// The load tester and its packages, and cmd/fleet (make fleet's flags);
	// and the scripts' own (the case patterns of their argument loops:
	// make fleet prints ./scripts/install-deps.sh --demo as it runs it).
	flags := definedFlags(t, "loadtest", "internal", "cmd/fleet")
	scripts, err := filepath.Glob("scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range scripts {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*--([a-z][a-z0-9-]*)\)`).FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	for _, want := range []string{"url", "stock", "listen", "demo"} { // the parsers find what they should
		if !flags[want] {
			t.Fatalf("found no flag %q in the sources (found %d flags): is the test reading them right?", want, len(flags))
		}
	}
	re := regexp.MustCompile(`(?:^|[\s'"(])--([a-z][a-z0-9-]*)`)
	for _, l := range readmeCode(t) {
		if strings.Contains(l.text, "docker ") { // Docker's own flags
			continue
		}
		for _, m := range re.FindAllStringSubmatch(l.text, -1) {
			if !flags[m[1]] {
				t.Errorf("README.md:%d names the flag --%s, which neither the load tester, cmd/fleet nor a script defines", l.n, m[1])
			}
		}
	}
}

// route is a method and a chi path template such as /products/{id}.
type route struct{ method, path string }

// routerRoutes returns every route that internal/api/routes.go registers:
// r.Get("/x", …), r.With(…).Put("/x", …), r.Method("GET", "/x", …).
func routerRoutes(t *testing.T) []route {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "internal/api/routes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	var routes []route
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		switch m := sel.Sel.Name; m {
		case "Get", "Post", "Put", "Delete", "Patch", "Head":
			if p, ok := str(call.Args[0]); ok {
				routes = append(routes, route{strings.ToUpper(m), p})
			}
		case "Method":
			if len(call.Args) > 1 {
				meth, ok1 := str(call.Args[0])
				p, ok2 := str(call.Args[1])
				if ok1 && ok2 {
					routes = append(routes, route{meth, p})
				}
			}
		}
		return true
	})
	if len(routes) < 10 {
		t.Fatalf("found %d routes in internal/api/routes.go: is the test reading it right?", len(routes))
	}
	return routes
}

// matches reports whether path, a template or a concrete path, is the
// route's template or an instance of it.
func (r route) matches(path string) bool {
	if path == r.path {
		return true
	}
	want, got := strings.Split(r.path, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] != got[i] && !(strings.HasPrefix(want[i], "{") && got[i] != "") {
			return false
		}
	}
	return true
}

// readmeRoutes returns the routes the README names: "GET /products/{id}"
// (method and path) and curl's localhost:8080/… (a path, the method given
// by -X or GET).
func readmeRoutes(t *testing.T) (named []route, lines []int) {
	t.Helper()
	call := regexp.MustCompile(`\b(GET|POST|PUT|DELETE|PATCH|HEAD) (/[^\s` + "`" + `,;)'"]*)`)
	curl := regexp.MustCompile(`localhost:8080(/[^\s'"]*)`)
	method := regexp.MustCompile(`-X ([A-Z]+)`)
	clean := func(p string) string {
		p, _, _ = strings.Cut(p, "?")
		return strings.TrimRight(p, ".:")
	}
	for _, l := range readmeCode(t) {
		for _, m := range call.FindAllStringSubmatch(l.text, -1) {
			named, lines = append(named, route{m[1], clean(m[2])}), append(lines, l.n)
		}
		if !strings.Contains(l.text, "curl ") {
			continue
		}
		meth := "GET"
		if m := method.FindStringSubmatch(l.text); m != nil {
			meth = m[1]
		}
		for _, m := range curl.FindAllStringSubmatch(l.text, -1) {
			named, lines = append(named, route{meth, clean(m[1])}), append(lines, l.n)
		}
	}
	return named, lines
}

func TestReadmeRoutesExist(t *testing.T) {
	routes := routerRoutes(t)
	named, lines := readmeRoutes(t)
	for i, n := range named {
		if !slices.ContainsFunc(routes, func(r route) bool { return r.method == n.method && r.matches(n.path) }) {
			t.Errorf("README.md:%d names %s %s, which internal/api/routes.go does not route", lines[i], n.method, n.path)
		}
	}
	for _, r := range routes {
		if !slices.ContainsFunc(named, func(n route) bool { return n.method == r.method && n.path == r.path }) {
			t.Errorf("internal/api/routes.go routes %s %s, which README.md's API table does not name", r.method, r.path)
		}
	}

	// openapi.yaml describes the same routes (internal/api's spec tests
	// check it against the router in depth; this keeps the README's
	// table, the router and the description naming the same paths).
	b, err := os.ReadFile("internal/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for i, n := range named {
		found := false
		for p, ops := range doc.Paths {
			if _, ok := ops[strings.ToLower(n.method)]; ok && (route{n.method, p}).matches(n.path) {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md:%d names %s %s, which internal/api/openapi.yaml does not describe", lines[i], n.method, n.path)
		}
	}
}

func TestReadmeEnvironmentIsTheServicesConfig(t *testing.T) {
	src, err := os.ReadFile("cmd/inventory/config.go")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`env:"([A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		read[m[1]] = true
	}
	if len(read) < 10 {
		t.Fatalf("found %d env tags in cmd/inventory/config.go: is the test reading it right?", len(read))
	}
	// The lock backends' settings are read through their descriptors
	// (backend.Descriptor.Setting, each a const Setting of the backend's
	// package), which cmd/inventory's one list of backends opens.
	descriptors, err := filepath.Glob("internal/lock/*/descriptor.go")
	if err != nil || len(descriptors) == 0 {
		t.Fatalf("no lock backend descriptors (internal/lock/*/descriptor.go): %v", err)
	}
	for _, d := range descriptors {
		src, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`Setting = "([A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
			read[m[1]] = true
		}
	}
	// The README names some settings; docs/operations.md's configuration
	// table, which the README links to, names every one.
	re := regexp.MustCompile(`\bINVENTORY_[A-Z0-9_]+`)
	from, to := sectionLines(t, "docs/operations.md", "## Configuration")
	for _, doc := range []string{"README.md", "docs/operations.md"} {
		named := map[string]bool{}
		for _, l := range markdownCode(t, doc) {
			for _, v := range re.FindAllString(l.text, -1) {
				named[v] = named[v] || (l.n >= from && l.n < to)
				if strings.HasPrefix(v, "INVENTORY_TEST_") {
					continue // the tests' own settings (docs/testing.md), not the service's
				}
				if !read[v] {
					t.Errorf("%s:%d names %s, which cmd/inventory/config.go does not read", doc, l.n, v)
				}
			}
		}
		if doc != "docs/operations.md" {
			continue
		}
		for v := range read {
			if !named[v] {
				t.Errorf("cmd/inventory/config.go reads %s, which docs/operations.md's configuration table does not name", v)
			}
		}
	}
}

func TestReadmeLinksExist(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("README.md:%d links to %s, which does not exist", i+1, target)
			}
		}
	}
}

// sectionLines returns the lines [from, to) of a Markdown file's section
// under heading, up to the next heading of its level.
func sectionLines(t *testing.T, path, heading string) (from, to int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	level := heading[:strings.Index(heading, " ")+1]
	for i, line := range lines {
		switch {
		case line == heading:
			from = i + 1
		case from > 0 && strings.HasPrefix(line, level):
			return from, i + 1
		}
	}
	if from == 0 {
		t.Fatalf("%s has no section %q", path, heading)
	}
	return from, len(lines) + 1
}
