package main

import (
	"fmt"
	"go/ast"
	"go/token"
)

// noAliases are the folders that declare no alias of another package's name:
// the types crossing the Temporal boundary live in state/steps, and
// activities/ uses them as they are (docs/architecture.md, "Layers and rules").
var noAliases = []string{"activities"}

// checkAliases returns a violation for each type alias of another package's
// type (type X = pkg.Y) and each exported constant or variable that only
// repeats another package's name (X = pkg.Y) in f.
func checkAliases(fset *token.FileSet, f *ast.File, rel string) []string {
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range gd.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Assign.IsValid() && qualified(s.Type) != "" {
					out = append(out, fmt.Sprintf("%s:%d: type %s = %s: use %s itself, not an alias of it",
						rel, fset.Position(s.Pos()).Line, s.Name.Name, qualified(s.Type), qualified(s.Type)))
				}
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if i < len(s.Values) && n.IsExported() && qualified(s.Values[i]) != "" {
						out = append(out, fmt.Sprintf("%s:%d: %s = %s: use %s itself, not a copy of its name",
							rel, fset.Position(n.Pos()).Line, n.Name, qualified(s.Values[i]), qualified(s.Values[i])))
					}
				}
			}
		}
	}
	return out
}

// qualified is "pkg.Name" when e names another package's declaration
// (generic instances included), "" otherwise.
func qualified(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.IndexExpr:
		return qualified(x.X)
	case *ast.IndexListExpr:
		return qualified(x.X)
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + x.Sel.Name
		}
	}
	return ""
}
