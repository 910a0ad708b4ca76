package rules_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/rules/rulestest"
)

func domainYAML(name string, limit string) string {
	return "domain: " + name + "\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: " + limit + "\n"
}

// newManager returns a Manager over a Service counting on an engine, and
// a function that answers the limit in force for domain's k=v.
func newManager(t *testing.T, file string) (*rules.Manager, func(domain string) uint32) {
	clock := engine.NewManualClock(rulestest.T0)
	eng, err := engine.New(engine.Config{Shards: 4, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	m := rules.NewManager(rules.ManagerConfig{Service: rules.NewService(rules.Config{Store: engineStore{eng.NewView()}, Now: clock.Now}), File: file, NodeID: "n1"})
	limit := func(domain string) uint32 {
		hits := uint64(0)
		resp, err := m.Service().ShouldRateLimit(context.Background(), rules.Request{Domain: domain,
			Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "k", Value: "v"}}, HitsAddend: &hits}}})
		if err != nil {
			t.Fatal(err)
		}
		if l := resp.Statuses[0].CurrentLimit; l != nil {
			return l.RequestsPerUnit
		}
		return 0
	}
	return m, limit
}

// A directory of domains loads; a reload that fails keeps the rules in
// force and says where; two files of one domain are refused; RULES SET
// wins over the file's domain until RULES DEL.
func TestManagerReloadAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", domainYAML("a", "5"))
	write("b.yml", domainYAML("b", "6"))
	write(".hidden.yaml", "not: [yaml")
	write("notes.txt", "ignored")
	m, limit := newManager(t, dir)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if limit("a") != 5 || limit("b") != 6 {
		t.Fatalf("limits %d %d", limit("a"), limit("b"))
	}
	write("a.yaml", domainYAML("a", "x"))
	err := m.Reload()
	if err == nil || !strings.Contains(err.Error(), "a.yaml:6: cannot unmarshal") {
		t.Fatalf("broken reload: %v", err)
	}
	if limit("a") != 5 || m.Info().Failures != 1 || m.Info().LastError == "" {
		t.Fatalf("after a broken reload: limit %d, %+v", limit("a"), m.Info())
	}
	write("a.yaml", domainYAML("a", "7"))
	write("c.yaml", domainYAML("b", "8"))
	if err := m.Reload(); err == nil || !strings.Contains(err.Error(), "duplicate domain 'b'") {
		t.Fatalf("two files of one domain: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil || limit("a") != 7 || m.Info().LastError != "" {
		t.Fatalf("reload: %v, limit %d", err, limit("a"))
	}
	if err := m.SetDomain("a", []byte(domainYAML("a", "1"))); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil || limit("a") != 1 {
		t.Fatalf("RULES SET under a reload: %v, limit %d", err, limit("a"))
	}
	if !m.DelDomain("a") || limit("a") != 7 {
		t.Fatalf("after RULES DEL the file's domain: limit %d", limit("a"))
	}
	if m.DelDomain("b") {
		t.Fatal("RULES DEL of a file's domain")
	}
}

// The RULES SET domains merge by version, then node id: an older copy is
// ignored, a newer one replaces the set whole.
func TestManagerMerge(t *testing.T) {
	m, limit := newManager(t, "")
	if err := m.SetDomain("a", []byte(domainYAML("a", "3"))); err != nil {
		t.Fatal(err)
	}
	if d := m.Dynamic(); d.Version != 1 || d.Node != "n1" {
		t.Fatalf("%+v", d)
	}
	if m.Merge(rules.Dynamic{Version: 1, Node: "n0", Domains: map[string]string{"a": domainYAML("a", "4")}}) || limit("a") != 3 {
		t.Fatal("an older copy (same version, lesser node) was taken")
	}
	if !m.Merge(rules.Dynamic{Version: 1, Node: "n2", Domains: map[string]string{"b": domainYAML("b", "4")}}) || limit("a") != 0 || limit("b") != 4 {
		t.Fatalf("a newer copy: a %d, b %d", limit("a"), limit("b"))
	}
	if err := m.SetDomain("c", []byte(domainYAML("c", "2"))); err != nil || m.Dynamic().Version != 2 {
		t.Fatalf("%v %+v", err, m.Dynamic())
	}
}

// Replace puts a set in force whatever its version (a replica takes its
// primary's), whole: a domain it lacks is gone, and a later RULES SET
// continues from its version.
func TestManagerReplace(t *testing.T) {
	m, limit := newManager(t, "")
	for i, name := range []string{"a", "b", "c"} {
		if err := m.SetDomain(name, []byte(domainYAML(name, "3"))); err != nil || m.Dynamic().Version != uint64(i+1) {
			t.Fatalf("%v %+v", err, m.Dynamic())
		}
	}
	m.Replace(rules.Dynamic{Version: 1, Node: "n0", Domains: map[string]string{"b": domainYAML("b", "4")}})
	if d := m.Dynamic(); d.Version != 1 || d.Node != "n0" || limit("a") != 0 || limit("b") != 4 || limit("c") != 0 {
		t.Fatalf("after Replace: %+v, a %d, b %d, c %d", d, limit("a"), limit("b"), limit("c"))
	}
	m.Replace(rules.Dynamic{})
	if limit("b") != 0 {
		t.Fatalf("an empty set left b at %d", limit("b"))
	}
	if err := m.SetDomain("a", []byte(domainYAML("a", "2"))); err != nil || m.Dynamic().Version != 1 || limit("a") != 2 {
		t.Fatalf("%v %+v", err, m.Dynamic())
	}
}

// A counter survives a reload when its rule is unchanged, and starts
// afresh when the rule's limit changes.
func TestCountersSurviveUnchangedRules(t *testing.T) {
	m, _ := newManager(t, "")
	check := func(domain string) uint32 {
		resp, err := m.Service().ShouldRateLimit(context.Background(), rules.Request{Domain: domain,
			Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "k", Value: "v"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0].LimitRemaining
	}
	for _, step := range []struct {
		limit string
		want  uint32
	}{{"5", 4}, {"5", 3}, {"5", 2}, {"6", 5}, {"6", 4}} {
		if err := m.SetDomain("a", []byte(domainYAML("a", step.limit))); err != nil {
			t.Fatal(err)
		}
		if got := check("a"); got != step.want {
			t.Fatalf("limit %s: remaining %d, want %d", step.limit, got, step.want)
		}
	}
}

// A descriptor whose counter's key would pass MaxKeySize is refused, an
// ErrBadRequest.
func TestKeyTooLarge(t *testing.T) {
	clock := engine.NewManualClock(rulestest.T0)
	eng, err := engine.New(engine.Config{Shards: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	svc := rules.NewService(rules.Config{Store: engineStore{eng.NewView()}, MaxKeySize: 100})
	d, err := rules.Parse("t", []byte(domainYAML("a", "5")))
	if err != nil {
		t.Fatal(err)
	}
	svc.SetRules(rules.NewSet(time.Time{}, d))
	ask := func(v string) error {
		_, err := svc.ShouldRateLimit(context.Background(), rules.Request{Domain: "a",
			Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "k", Value: v}}}}})
		return err
	}
	if err := ask(strings.Repeat("v", 200)); !errors.Is(err, rules.ErrKeyTooLarge) || !errors.Is(err, rules.ErrBadRequest) {
		t.Fatalf("a long value: %v", err)
	}
	if err := ask("v"); err != nil {
		t.Fatal(err)
	}
}

// The metric keys detailed_metric makes of request values are bounded in
// bytes as well as in number: 100 values of 60 KB (each within
// MaxKeySize) made 6 MB of keys, and 10000 of them 600 MB, kept for the
// life of the server.
func TestMetricKeysBoundedInBytes(t *testing.T) {
	clock := engine.NewManualClock(rulestest.T0)
	eng, err := engine.New(engine.Config{Shards: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	svc := rules.NewService(rules.Config{Store: engineStore{eng.NewView()}, Now: clock.Now})
	d, err := rules.Parse("t", []byte("domain: a\ndescriptors:\n  - key: k\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc.SetRules(rules.NewSet(time.Time{}, d))
	for i := range 100 {
		v := strings.Repeat("v", 60<<10) + strconv.Itoa(i)
		if _, err := svc.ShouldRateLimit(context.Background(), rules.Request{Domain: "a",
			Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "k", Value: v}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	total, hits := 0, uint64(0)
	svc.EachStats(func(key string, st *rules.Stats) {
		total += len(key)
		hits += st.TotalHits.Load()
	})
	if total > 4<<20+64<<10 { // the bound, and the rule's own key
		t.Errorf("metric keys take %d bytes, want at most 4 MiB", total)
	}
	if hits != 100 {
		t.Errorf("%d hits counted, want 100", hits)
	}
	if st := svc.StatsOf("a.k"); st == nil || st.TotalHits.Load() == 0 {
		t.Error("no hits counted under the rule's own key past the bound")
	}
}
