package rules_test

import (
	"context"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/rules/rulestest"
)

// engineStore charges counters on an engine, as the daemon's Store does
// for the slots a node serves.
type engineStore struct{ v *engine.View }

func (s engineStore) Apply(_ context.Context, c *rules.Charge) (limiter.Result, error) {
	return s.v.Apply(c.Key, &c.Request, nil)
}

// serviceFront asks the Service directly.
type serviceFront struct {
	svc   *rules.Service
	clock *engine.ManualClock
}

func newServiceFront(t *testing.T) rulestest.Front {
	clock := engine.NewManualClock(rulestest.T0)
	eng, err := engine.New(engine.Config{Shards: 4, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	svc := rules.NewService(rules.Config{Store: engineStore{eng.NewView()}, Now: clock.Now})
	return &serviceFront{svc: svc, clock: clock}
}

func (f *serviceFront) SetRules(t *testing.T, text string) error {
	d, err := rules.Parse("test.yaml", []byte(text))
	if err != nil {
		return err
	}
	old := f.svc.Rules().Domains()
	f.svc.SetRules(rules.NewSet(time.Unix(0, f.clock.Now()), append(old, d)...))
	return nil
}

func (f *serviceFront) SetClock(t *testing.T, ns int64) { f.clock.Set(ns) }

func (f *serviceFront) Check(t *testing.T, req rules.Request) (rules.Response, error) {
	return f.svc.ShouldRateLimit(context.Background(), req)
}

func (f *serviceFront) Stats(t *testing.T, key string) string {
	st := f.svc.StatsOf(key)
	if st == nil {
		return "none"
	}
	return rulestest.FormatStats(st)
}

// TestTranscripts runs every transcript of testdata/ against the Service:
// envoyproxy/ratelimit's eleven README examples, its corners, and the
// extensions.
func TestTranscripts(t *testing.T) {
	rulestest.Run(t, "testdata", newServiceFront)
}
