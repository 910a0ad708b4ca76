package rules_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/rules"
)

// FuzzParse: whatever text RULES SET is given, Parse refuses it with an
// error or compiles a domain that answers a check, and never panics.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		for _, block := range strings.Split(string(b), "----") {
			if i := strings.Index(block, "domain:"); i >= 0 {
				f.Add(block[i:])
			}
		}
	}
	eng, err := engine.New(engine.Config{Shards: 1, Clock: engine.NewManualClock(1)})
	if err != nil {
		f.Fatal(err)
	}
	defer eng.Close()
	svc := rules.NewService(rules.Config{Store: engineStore{eng.NewView()}})
	f.Fuzz(func(t *testing.T, text string) {
		d, err := rules.Parse("fuzz", []byte(text))
		if err != nil {
			return
		}
		svc.SetRules(rules.NewSet(svc.Rules().Loaded, d))
		for _, r := range d.Rules {
			var entries []rules.Entry
			for _, part := range strings.Split(strings.TrimPrefix(r.Key, d.Name+"."), ".") {
				k, v, _ := strings.Cut(part, "_")
				entries = append(entries, rules.Entry{Key: k, Value: strings.ReplaceAll(v, "*", "x")})
			}
			if _, err := svc.ShouldRateLimit(context.Background(), rules.Request{Domain: d.Name,
				Descriptors: []rules.Descriptor{{Entries: entries}}, HitsAddend: 3}); err != nil {
				t.Fatalf("%s: %v", r.Key, err)
			}
		}
	})
}
