package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// packageFiles is the package's own Go files by name, parsed, tests apart.
func packageFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = file
	}
	if len(files) == 0 {
		t.Fatal("found none of the package's Go files")
	}
	return files
}

// The contract stands below both of its sides: wire imports only the
// standard library, so that the client never pulls in the service.
func TestWireImportsOnlyTheStandardLibrary(t *testing.T) {
	for name, file := range packageFiles(t) {
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") || first == "inventory" {
				t.Errorf("%s imports %q; wire may import only the standard library", name, path)
			}
		}
	}
}
