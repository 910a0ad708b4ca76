package rules

import (
	"sort"
	"time"
)

// Set is the rules in force: every domain, from the rules file(s) and
// from RULES SET. A Set is not changed once built; a reload builds a new
// one and swaps it in (Service.SetRules).
type Set struct {
	domains map[string]*Domain
	// Loaded is when the set was built.
	Loaded time.Time
}

// NewSet returns a set of the domains given; a later one of the same name
// wins.
func NewSet(loaded time.Time, domains ...*Domain) *Set {
	s := &Set{domains: make(map[string]*Domain, len(domains)), Loaded: loaded}
	for _, d := range domains {
		s.domains[d.Name] = d
	}
	return s
}

// Domain returns the domain name, nil when the set has none such (a nil
// *Domain matches nothing).
func (s *Set) Domain(name string) *Domain {
	if s == nil {
		return nil
	}
	return s.domains[name]
}

// Domains returns the set's domains sorted by name.
func (s *Set) Domains() []*Domain {
	out := make([]*Domain, 0, len(s.domains))
	for _, d := range s.domains {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NumRules returns how many rate_limit blocks the set holds.
func (s *Set) NumRules() int {
	n := 0
	for _, d := range s.domains {
		n += len(d.Rules)
	}
	return n
}
