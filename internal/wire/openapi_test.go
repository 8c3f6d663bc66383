package wire

import (
	"fmt"
	"go/ast"
	"go/token"
	"iter"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// specPath is the OpenAPI description the service serves (internal/api
// embeds it): the source of truth these types must match.
const specPath = "../api/openapi.yaml"

// contract names where each body of the API is described: the request
// body (status 0) or the 200/201 answer of an operation. Every type of
// this package that is a body is here; TestEveryBodyTypeIsChecked keeps
// it so.
var contract = []struct {
	value        any
	method, path string
	status       int
}{
	{SaleRequest{}, "POST", "/sale", 0},
	{SaleBody{}, "POST", "/sale", 0},
	{Sale{}, "POST", "/sale", 200},
	{HeldSale{}, "POST", "/sale", 201},
	{ProductSaleRequest{}, "POST", "/products/{id}/sale", 0},
	{ProductSaleBody{}, "POST", "/products/{id}/sale", 0},
	{Sale{}, "POST", "/products/{id}/sale", 200},
	{HeldSale{}, "POST", "/products/{id}/sale", 201},
	{Order{}, "GET", "/orders/{id}", 200},
	{Order{}, "POST", "/orders/{id}/pay", 200},
	{Order{}, "POST", "/orders/{id}/cancel", 200},
	{Order{}, "POST", "/orders/{id}/refund", 200},
	{Order{}, "POST", "/orders/{id}/ship", 200},
	{Product{}, "GET", "/products/{id}", 200},
	{RestockRequest{}, "PUT", "/products/{id}", 0},
	{RestockBody{}, "PUT", "/products/{id}", 0},
	{Product{}, "PUT", "/products/{id}", 200},
	{Product{}, "PUT", "/products/{id}", 201},
	{Round{}, "GET", "/products/{id}/rounds/{round}", 200},
	{Holds{}, "GET", "/products/{id}/holds", 200},
	{Circuit{}, "POST", "/products/{id}/circuit", 200},
	{[]StrategyInfo{}, "GET", "/strategies", 200},
	{StrategyChoice{}, "GET", "/strategy", 200},
	{StrategyChoice{}, "PUT", "/strategy", 0},
	{StrategyChoiceBody{}, "PUT", "/strategy", 0},
	{StrategyChoice{}, "PUT", "/strategy", 200},
	{Health{}, "GET", "/healthz", 200},
	{Health{}, "GET", "/readyz", 200},
	{Live{}, "GET", "/live", 200},
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatalf("load %s: %v", specPath, err)
	}
	return doc
}

// bodySchema is the JSON schema of method path's request body (status 0)
// or of its answer with status.
func bodySchema(doc *openapi3.T, method, path string, status int) (*openapi3.Schema, error) {
	item := doc.Paths.Find(path)
	if item == nil {
		return nil, fmt.Errorf("no path %s", path)
	}
	op := item.GetOperation(method)
	if op == nil {
		return nil, fmt.Errorf("no operation %s %s", method, path)
	}
	var content openapi3.Content
	if status == 0 {
		if op.RequestBody == nil {
			return nil, fmt.Errorf("%s %s has no request body", method, path)
		}
		content = op.RequestBody.Value.Content
	} else {
		resp := op.Responses.Status(status)
		if resp == nil {
			return nil, fmt.Errorf("%s %s has no %d answer", method, path, status)
		}
		content = resp.Value.Content
	}
	media := content.Get("application/json")
	if media == nil || media.Schema == nil {
		return nil, fmt.Errorf("%s %s %d has no application/json schema", method, path, status)
	}
	return media.Schema.Value, nil
}

// Every type is the JSON of its schema in openapi.yaml: each member a
// property of a compatible type (integers int64), and each property of
// the schema, required or not, a member.
func TestTypesMatchOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	for _, c := range contract {
		where := fmt.Sprintf("%T as %s %s", c.value, c.method, c.path)
		if c.status != 0 {
			where += fmt.Sprintf(" %d", c.status)
		}
		schema, err := bodySchema(doc, c.method, c.path, c.status)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		for _, problem := range matchSchema(reflect.TypeOf(c.value), schema, "") {
			t.Errorf("%s: %s", where, problem)
		}
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil {
		t.Fatal("openapi.yaml has no components.schemas.Problem")
	}
	for _, p := range matchSchema(reflect.TypeFor[Problem](), problem.Value, "") {
		t.Errorf("Problem: %s", p)
	}
}

var timeType = reflect.TypeFor[time.Time]()

// matchSchema lists how typ, read and written as JSON by encoding/json,
// departs from schema; at names the member being looked at.
func matchSchema(typ reflect.Type, schema *openapi3.Schema, at string) []string {
	if at == "" {
		at = "the body"
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	// A nullable member: oneOf null and the schema of its value.
	if len(schema.OneOf) == 2 {
		for i, s := range schema.OneOf {
			if s.Value.Type.Is("null") {
				schema = schema.OneOf[1-i].Value
				break
			}
		}
	}
	want := func(jsonType string) []string {
		if !schema.Type.Includes(jsonType) {
			return []string{fmt.Sprintf("%s is %s in Go, but of type %v in openapi.yaml", at, typ, schema.Type.Slice())}
		}
		return nil
	}
	switch {
	case typ == timeType:
		if out := want("string"); out != nil {
			return out
		}
		if schema.Format != "date-time" {
			return []string{fmt.Sprintf("%s is a time.Time in Go, but of format %q in openapi.yaml, want date-time", at, schema.Format)}
		}
		return nil
	case typ.Kind() == reflect.String:
		return want("string")
	case typ.Kind() == reflect.Bool:
		return want("boolean")
	case typ.Kind() == reflect.Int64:
		return want("integer")
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		// One width on both sides, so that neither reads into a narrower
		// type than the other writes.
		return []string{fmt.Sprintf("%s is %s in Go; an integer of the wire is an int64", at, typ)}
	case typ.Kind() == reflect.Slice:
		if out := want("array"); out != nil {
			return out
		}
		if schema.Items == nil {
			return []string{fmt.Sprintf("%s is %s in Go, but openapi.yaml gives no items schema", at, typ)}
		}
		return matchSchema(typ.Elem(), schema.Items.Value, at+"[]")
	case typ.Kind() == reflect.Map:
		if out := want("object"); out != nil {
			return out
		}
		if typ.Key().Kind() != reflect.String || schema.AdditionalProperties.Schema == nil {
			return []string{fmt.Sprintf("%s is %s in Go, but openapi.yaml gives no additionalProperties schema", at, typ)}
		}
		return matchSchema(typ.Elem(), schema.AdditionalProperties.Schema.Value, at+"[*]")
	case typ.Kind() == reflect.Struct:
		if out := want("object"); out != nil {
			return out
		}
		var out []string
		members := map[string]bool{}
		for f := range jsonFields(typ) {
			name := f.Tag.Get("json")
			name, _, _ = strings.Cut(name, ",")
			if name == "" {
				name = f.Name
			}
			members[name] = true
			where := fmt.Sprintf("member %q (%s.%s)", name, typ.Name(), f.Name)
			prop := schema.Properties[name]
			if prop == nil {
				out = append(out, fmt.Sprintf("%s is not a property of the schema of %s (it has %s)", where, at, strings.Join(slices.Sorted(maps.Keys(schema.Properties)), ", ")))
				continue
			}
			out = append(out, matchSchema(f.Type, prop.Value, where)...)
		}
		// A required name the schema does not describe is still one a
		// body must carry.
		names := slices.Sorted(maps.Keys(schema.Properties))
		for _, name := range schema.Required {
			if schema.Properties[name] == nil {
				names = append(names, name)
			}
		}
		for _, name := range names {
			if !members[name] {
				req := "property"
				if slices.Contains(schema.Required, name) {
					req = "required property"
				}
				out = append(out, fmt.Sprintf("%s %q of %s has no field in %s", req, name, at, typ.Name()))
			}
		}
		return out
	}
	return []string{fmt.Sprintf("%s is %s in Go: no JSON type of openapi.yaml matches it", at, typ)}
}

// jsonFields yields the fields of struct type typ that encoding/json
// writes and reads.
func jsonFields(typ reflect.Type) iter.Seq[reflect.StructField] {
	return func(yield func(reflect.StructField) bool) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if !yield(f) {
				return
			}
		}
	}
}

// Every exported struct type of the package is a body contract checks,
// or the type of a member of one: a new body cannot skip the check.
func TestEveryBodyTypeIsChecked(t *testing.T) {
	checked := map[string]bool{"Problem": true}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[Sale]().PkgPath() || checked[typ.Name()] {
			return
		}
		checked[typ.Name()] = true
		for f := range jsonFields(typ) {
			walk(f.Type)
		}
	}
	for _, c := range contract {
		walk(reflect.TypeOf(c.value))
	}
	var structs []string
	for _, file := range packageFiles(t) {
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() {
					structs = append(structs, ts.Name.Name)
				}
			}
		}
	}
	if len(structs) == 0 {
		t.Fatal("found no exported struct type in the package's files")
	}
	for _, name := range structs {
		if !checked[name] {
			t.Errorf("%s is not checked against openapi.yaml: add it to contract", name)
		}
	}
}
