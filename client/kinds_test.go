package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// TestEveryKindHasAClientKind: limit.go declares an exported constant for
// every base kind of limiter.Kinds (the kinds users build a Limit of), and
// a Limit of each is sent as that kind's command and ML.THROTTLE word.
func TestEveryKindHasAClientKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "limit.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{} // limiter.KindX named by an exported constant
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].IsExported() && len(vs.Values) == 1 {
			if sel, ok := vs.Values[0].(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "limiter" {
					declared[sel.Sel.Name] = true
				}
			}
		}
		return true
	})
	names := map[limiter.Kind]string{GCRA: "KindGCRA", TokenBucket: "KindTokenBucket", SlidingWindow: "KindSlidingWindow", FixedWindow: "KindFixedWindow", Queue: "KindLeakyQueue"}
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if !k.Base() {
			continue
		}
		if !declared[names[k]] {
			t.Errorf("kind %d (%s): no exported constant of package client names it", k, k.Spec().Command)
		}
		l := Limit{Kind: k, Burst: 5, Rate: 10, Period: 60e9}
		if _, err := l.period(); err != nil {
			t.Errorf("kind %d: %v", k, err)
		}
		if l.command() == "" || l.word() == "" || l.capacity() <= 0 {
			t.Errorf("kind %d: command %q, word %q, capacity %d", k, l.command(), l.word(), l.capacity())
		}
	}
}
