package rules

import "strings"

// maxDepth bounds a descriptor's entries: a match walks one tree level
// per entry, and no configuration nests deeper than a handful.
const maxDepth = 64

// match is what a descriptor matched: the rule (nil: none) and the nodes
// of the path that led to it, one per entry (for the counter key's
// shared wildcard values and the metric key).
type match struct {
	rule  *Rule
	path  [maxDepth]*node
	wild  [maxDepth]bool // the entry matched its node through a wildcard
	exact [maxDepth]bool // the entry matched its node by key and value
	depth int
}

// lookup matches entries against d's tree as envoyproxy/ratelimit does:
// level by level, "key_value" first, then the level's wildcard values in
// the file's order (the first that matches wins), then the value-less
// "key"; a rule counts only at the level of the descriptor's last entry,
// so a descriptor with more or fewer entries than the rule's depth does
// not match it.
func (d *Domain) lookup(entries []Entry, m *match) {
	m.rule, m.depth = nil, 0
	if d == nil || len(entries) == 0 || len(entries) > maxDepth {
		return
	}
	cur := &d.root
	var buf [128]byte
	for i, e := range entries {
		if len(cur.children) == 0 {
			return
		}
		fk := append(append(append(buf[:0], e.Key...), '_'), e.Value...)
		next := cur.children[string(fk)]
		exact, wild := next != nil, false
		if next == nil {
			for j := range cur.wildcards {
				if wildcardMatch(cur.wildcards[j].parts, string(fk)) {
					next, wild = cur.children[cur.wildcards[j].key], true
					break
				}
			}
		}
		if next == nil {
			next = cur.children[e.Key]
		}
		if next == nil {
			return
		}
		m.path[i], m.wild[i], m.exact[i], m.depth = next, wild, exact && !wild, i+1
		if i == len(entries)-1 {
			m.rule = next.rule
			return
		}
		cur = next
	}
}

// wildcardMatch reports whether s matches the pattern split at its '*'s
// (each '*' matches any run of bytes, the empty one included).
func wildcardMatch(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}

// appendCounterKey appends the key of the counter that m's rule keeps
// for entries: "rl:{domain_k1_v1_k2_v2_}:id". The hash tag is the
// descriptor, as envoyproxy/ratelimit's cache key is, so in cluster mode
// each descriptor's counter lives on its own slot; a shared wildcard
// (share_threshold) puts its pattern in place of the value, so every
// value it matches shares one counter. The rule's id ends the key: an
// unchanged rule finds its counter again after a reload.
func appendCounterKey(b []byte, domain string, entries []Entry, m *match) []byte {
	b = append(b, "rl:{"...)
	b = append(b, domain...)
	b = append(b, '_')
	for i, e := range entries {
		b = append(b, e.Key...)
		b = append(b, '_')
		if n := m.path[i]; n != nil && n.share {
			b = append(b, n.value...)
		} else {
			b = append(b, e.Value...)
		}
		b = append(b, '_')
	}
	b = append(b, "}:"...)
	return append(b, m.rule.id...)
}

// metricKey returns the key m's rule's statistics are counted under, as
// envoyproxy/ratelimit names it: the rule's own key, or with
// detailed_metric the request's values (a shared wildcard's pattern for
// an entry with share_threshold), or with value_to_metric on the path the
// values of those entries. It allocates only for the last two.
func metricKey(domain string, entries []Entry, m *match) string {
	r := m.rule
	if r.Detailed {
		var b strings.Builder
		b.WriteString(domain)
		for i, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.Key)
			n := m.path[i]
			switch {
			case n != nil && n.share && m.wild[i]:
				b.WriteByte('_')
				b.WriteString(n.value) // the pattern, '*' included
			case e.Value != "":
				b.WriteByte('_')
				b.WriteString(e.Value)
			}
		}
		return b.String()
	}
	changed := false
	for i := range entries {
		if n := m.path[i]; n != nil && n.toMetric && !m.exact[i] && !(m.wild[i] && n.share) {
			changed = true
		}
	}
	if !changed {
		return r.Key
	}
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		n := m.path[i]
		v := ""
		switch {
		case m.wild[i] && (n.share || !n.toMetric):
			v = n.value // the pattern, '*' included
		case m.exact[i] || n.toMetric:
			v = e.Value
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// maxIDLen is the longest rule id: a uint64 in base 36.
const maxIDLen = 13

// CounterKeyLen returns the most bytes the counter key of a descriptor
// of entries in domain takes (appendCounterKey), for a front end that
// bounds keys' sizes.
func CounterKeyLen(domain string, entries []Entry) int {
	n := len("rl:{") + len(domain) + 1 + len("}:") + maxIDLen
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	return n
}
