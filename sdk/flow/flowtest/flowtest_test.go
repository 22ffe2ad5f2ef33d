package flowtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk/flow"
)

// actionTypes parses package flow and lists the types with an isAction
// method: every action type, whether or not a sample exists for it.
func actionTypes(t *testing.T) []string {
	fset := token.NewFileSet()
	//lint:ignore SA1019 package flow has no build tags; x/tools/go/packages would be a dependency for nothing
	pkgs, err := parser.ParseDir(fset, "..", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Name.Name != "isAction" || fn.Recv == nil {
					continue
				}
				if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
					out = append(out, star.X.(*ast.Ident).Name)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestEveryActionTypeHasASample: adding an Act* type to package flow
// without a sample here fails, and the codec and host tests that iterate
// Actions then check the new type in every layer.
func TestEveryActionTypeHasASample(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Actions("t") {
		if err := s.Action.Validate(); err != nil {
			t.Errorf("sample %s is invalid: %v", s.Name, err)
		}
		seen[reflect.TypeOf(s.Action).Elem().Name()] = true
	}
	var have []string
	for n := range seen {
		have = append(have, n)
	}
	sort.Strings(have)
	if diff := cmp.Diff(actionTypes(t), have); diff != "" {
		t.Errorf("action types of package flow (-) without a sample in flowtest.Actions (+ unknown):\n%s", diff)
	}
}

// TestEveryMatchKindHasASample does the same for match kinds.
func TestEveryMatchKindHasASample(t *testing.T) {
	seen := map[flow.MatchKind]bool{}
	for _, s := range Matches() {
		for _, f := range s.Match.Fields() {
			if err := f.Validate(); err != nil {
				t.Errorf("sample %s: %v", s.Name, err)
			}
			seen[f.Kind] = true
		}
	}
	for k := flow.MatchKind(1); k.Valid(); k++ {
		if !seen[k] {
			t.Errorf("match kind %s has no sample in flowtest.Matches", k)
		}
	}
}
