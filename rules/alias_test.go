package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// laughs returns a rule set whose aliases expand to 10^levels
// descriptors: "billion laughs".
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("domain: d\nx:\n")
	b.WriteString("  - &l0 [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  - &l%d [", i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{key: k%d, descriptors: *l%d}", j, i-1)
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "descriptors: *l%d\n", levels)
	return b.String()
}

// TestParseRefusesAliasBomb: a 2 KB rule set whose aliases expand to a
// million descriptors is refused at once, not decoded (it took over 10 s
// and grew tenfold a level).
func TestParseRefusesAliasBomb(t *testing.T) {
	began := time.Now()
	_, err := Parse("bomb.yaml", []byte(laughs(6)))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "aliases expand the document") {
		t.Fatalf("Parse = %v, want the alias expansion refused", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("Parse took %v", d)
	}
}

// TestParseAcceptsModestAliases: an anchor reused a few times still
// loads, as YAML allows.
func TestParseAcceptsModestAliases(t *testing.T) {
	text := `domain: d
descriptors:
  - key: a
    rate_limit: &rl {unit: second, requests_per_unit: 5}
  - key: b
    rate_limit: *rl
  - key: c
    descriptors: &sub
      - key: x
        rate_limit: *rl
  - key: e
    descriptors: *sub
`
	d, err := Parse("ok.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rules) != 4 {
		t.Fatalf("%d rules, want 4", len(d.Rules))
	}
}

// TestParseRefusesSelfAlias: an alias inside its own anchor is refused
// without recursing forever.
func TestParseRefusesSelfAlias(t *testing.T) {
	_, err := Parse("self.yaml", []byte("domain: d\ndescriptors: &a\n  - key: k\n    descriptors: *a\n"))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Parse = %v, want refused", err)
	}
}
