package metrics

// The limits defined on the server (package rules) are reported through
// RulesSource, which package daemon implements over the rules' Manager:
// this package does not import rules.

import "github.com/prometheus/client_golang/prometheus"

// RuleCounters are one metric key's counters, as envoyproxy/ratelimit
// counts them.
type RuleCounters struct {
	Key                                                      string // "domain.key_value.subkey"
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode uint64
}

// RulesStats are the rules' figures.
type RulesStats struct {
	Domains, Rules    int
	LoadedUnix        float64 // when the set in force was put in force
	Reloads, Failures int64   // reloads of rules-file tried, and of those refused
	Counters          []RuleCounters
}

// RulesSource is what a Source implements to have its rules reported. Its
// method must be safe for concurrent use.
type RulesSource interface {
	Rules() RulesStats
}

var (
	descRuleHits = prometheus.NewDesc("cellserver_rule_hits_total",
		"Hits charged to the rules (RL.CHECK, the gRPC service), by metric key and counter as envoyproxy/ratelimit names them: total_hits, over_limit, near_limit, within_limit, shadow_mode.",
		[]string{"key", "counter"}, nil)
	descRulesDomains = prometheus.NewDesc("cellserver_rules_domains", "Rule domains in force.", nil, nil)
	descRulesRules   = prometheus.NewDesc("cellserver_rules_rules", "Rules (rate_limit blocks) in force.", nil, nil)
	descRulesLoaded  = prometheus.NewDesc("cellserver_rules_loaded_timestamp_seconds",
		"When the rules in force were put in force (Unix time).", nil, nil)
	descRulesReloads = prometheus.NewDesc("cellserver_rules_reloads_total",
		"Reloads of rules-file, by result (ok, failed: refused, the rules in force stayed).", []string{"result"}, nil)
)

func describeRules(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuleHits, descRulesDomains, descRulesRules, descRulesLoaded, descRulesReloads} {
		ch <- d
	}
}

func collectRules(src Source, ch chan<- prometheus.Metric) {
	rs, ok := src.(RulesSource)
	if !ok {
		return
	}
	s := rs.Rules()
	for _, c := range s.Counters {
		for _, v := range [...]struct {
			name string
			n    uint64
		}{{"total_hits", c.TotalHits}, {"over_limit", c.OverLimit}, {"near_limit", c.NearLimit},
			{"within_limit", c.WithinLimit}, {"shadow_mode", c.ShadowMode}} {
			ch <- prometheus.MustNewConstMetric(descRuleHits, prometheus.CounterValue, float64(v.n), c.Key, v.name)
		}
	}
	ch <- prometheus.MustNewConstMetric(descRulesDomains, prometheus.GaugeValue, float64(s.Domains))
	ch <- prometheus.MustNewConstMetric(descRulesRules, prometheus.GaugeValue, float64(s.Rules))
	ch <- prometheus.MustNewConstMetric(descRulesLoaded, prometheus.GaugeValue, s.LoadedUnix)
	ch <- prometheus.MustNewConstMetric(descRulesReloads, prometheus.CounterValue, float64(s.Reloads-s.Failures), "ok")
	ch <- prometheus.MustNewConstMetric(descRulesReloads, prometheus.CounterValue, float64(s.Failures), "failed")
}
