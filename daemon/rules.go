package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/server"
)

// rulesWatchInterval is how often rules-file is read to see whether it
// changed: a change is in force within it (well within a second).
const rulesWatchInterval = 250 * time.Millisecond

// rulesStore charges the rules' counters: on this node's engine for a slot
// it serves, else on the slot's owner, over the cluster's link in one hop
// (cluster.Node.Relay), as the kind's own command.
type rulesStore struct{ d *Daemon }

// errRulesSlot is a check's error when its counter's slot has no node to
// serve it now (being handed over, or no live owner).
var errRulesSlot = errors.New("rules: the counter's slot is not served now (CLUSTERDOWN or TRYAGAIN); retry")

func (s rulesStore) Apply(ctx context.Context, c *rules.Charge) (limiter.Result, error) {
	eng, node := s.d.srv.Engine(), s.d.node
	if node == nil {
		return eng.Apply(c.Key, &c.Request, nil)
	}
	slot := engine.Slot(c.Key)
	for try := 0; ; try++ {
		route, addr := node.Acquire(slot)
		switch route {
		case commands.RouteLocal:
			defer node.Release(slot)
			return eng.Apply(c.Key, &c.Request, nil)
		case commands.RouteMoved:
			raw, err := node.Relay(addr, c.Command())
			if err != nil {
				return limiter.Result{}, fmt.Errorf("rules: forwarding to %s: %w", addr, err)
			}
			return parseResult(raw)
		case commands.RouteTryAgain:
			// The slot is being handed over, which takes moments: wait
			// for it a little rather than fail a check a client cannot
			// retry elsewhere.
			if try < rulesHandoffTries {
				select {
				case <-time.After(rulesHandoffWait):
					continue
				case <-ctx.Done():
					return limiter.Result{}, ctx.Err()
				}
			}
		}
		return limiter.Result{}, errRulesSlot
	}
}

// A check whose counter's slot is being handed over waits for it up to
// rulesHandoffTries times rulesHandoffWait.
const (
	rulesHandoffTries = 20
	rulesHandoffWait  = 5 * time.Millisecond
)

// parseResult reads a limiter command's raw reply: five integers, or an
// error.
func parseResult(raw []byte) (limiter.Result, error) {
	var r limiter.Result
	if len(raw) > 0 && raw[0] == '-' {
		return r, errors.New("rules: the owner answered " + string(trimCRLF(raw[1:])))
	}
	var v [5]int64
	rest := raw
	line := func() ([]byte, bool) {
		for i := 0; i+1 < len(rest); i++ {
			if rest[i] == '\r' && rest[i+1] == '\n' {
				l := rest[:i]
				rest = rest[i+2:]
				return l, true
			}
		}
		return nil, false
	}
	if l, ok := line(); !ok || string(l) != "*5" {
		return r, cluster.ErrForwardReply
	}
	for i := range v {
		l, ok := line()
		if !ok || len(l) < 2 || l[0] != ':' {
			return r, cluster.ErrForwardReply
		}
		n, err := strconv.ParseInt(string(l[1:]), 10, 64)
		if err != nil {
			return r, cluster.ErrForwardReply
		}
		v[i] = n
	}
	return limiter.Result{Limited: v[0] == 1, Limit: v[1], Remaining: v[2], RetryAfter: v[3], ResetAfter: v[4]}, nil
}

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// newRules builds the rules' Service and Manager for cfg and loads
// rules-file; a file that does not load stops the start, with its file,
// line and reason.
func newRules(d *Daemon, cfg *server.Config) (*rules.Manager, error) {
	svc := rules.NewService(rules.Config{
		Store: rulesStore{d},
		Now:   func() int64 { return d.srv.Engine().Clock().Now() },
	})
	nodeID := ""
	if d.node != nil {
		nodeID = d.node.ID()
	}
	m := rules.NewManager(rules.ManagerConfig{
		Service: svc, File: cfg.RulesFile, NodeID: nodeID,
		Logf: func(level, format string, args ...any) {
			if d.srv != nil { // New's first load returns its error instead
				d.Logf(level, format, args...)
			}
		},
		OnChange: d.rulesChanged,
	})
	if err := m.Reload(); err != nil {
		return nil, fmt.Errorf("rules-file: %w", err)
	}
	cfg.Rules = m
	if d.node != nil {
		d.node.SetShared(rulesShared{d, m})
	}
	return m, nil
}

// rulesShared is the domains RULES SET defines as the state the cluster
// shares (cluster.SharedState): every node ends with the same copy, the
// one of highest version (then of greatest node id).
type rulesShared struct {
	d *Daemon
	m *rules.Manager
}

func (s rulesShared) State() []byte {
	b, _ := json.Marshal(s.m.Dynamic())
	return b
}

func (s rulesShared) Merge(b []byte) {
	var dyn rules.Dynamic
	if json.Unmarshal(b, &dyn) != nil {
		return
	}
	if s.m.Merge(dyn) {
		s.d.Logf("notice", "rules: the domains set with RULES SET are now version %d, from node %s", dyn.Version, dyn.Node)
		s.d.saveRules(dyn)
	}
}

// rulesMeta is the name of the store's metadata record that keeps the
// domains defined with RULES SET (persist.Store.PutMeta).
const rulesMeta = "rules"

// rulesChanged is told of every RULES SET and RULES DEL: with persistence
// on, the domains defined over RESP are written to the store at once, and
// in cluster mode sent to every other node.
func (d *Daemon) rulesChanged(dyn rules.Dynamic) {
	d.saveRules(dyn)
	if d.node != nil {
		d.node.ShareState()
	}
	if d.repl != nil {
		d.repl.RulesChanged()
	}
}

// replicaRules returns the domains RULES SET defined, for replication to
// send to replicas (replication.Config.Rules).
func (d *Daemon) replicaRules() []byte {
	b, _ := json.Marshal(d.rules.Dynamic())
	return b
}

// setReplicaRules puts in force on a replica the domains its primary
// defined with RULES SET, in place of its own, and keeps them in the
// store (replication.Config.SetRules). A set the replica holds already
// (each full copy sends it) is left as it is: the store's synchronous
// write would lengthen the copy, during which the replica answers
// LOADING.
func (d *Daemon) setReplicaRules(b []byte) {
	var dyn rules.Dynamic
	if err := json.Unmarshal(b, &dyn); err != nil {
		d.Logf("warning", "rules: the primary's domains set with RULES SET do not decode: %v", err)
		return
	}
	if cur := d.rules.Dynamic(); cur.Version == dyn.Version && cur.Node == dyn.Node && maps.Equal(cur.Domains, dyn.Domains) {
		return
	}
	d.rules.Replace(dyn)
	d.saveRules(dyn)
	d.Logf("verbose", "rules: the domains set with RULES SET are the primary's, version %d (%d domains)", dyn.Version, len(dyn.Domains))
}

// saveRules writes the domains set with RULES SET to the store, with
// persistence on.
func (d *Daemon) saveRules(dyn rules.Dynamic) {
	if d.p != nil {
		b, err := json.Marshal(dyn)
		if err == nil {
			err = d.p.store.PutMeta(rulesMeta, b)
		}
		if err != nil {
			d.Logf("warning", "rules: saving the domains set with RULES SET: %v", err)
		}
	}
}

// restoreRules puts in force the domains RULES SET defined before the
// last stop, from the store.
func restoreRules(m *rules.Manager, store *persist.Store) error {
	b, err := store.GetMeta(rulesMeta)
	if err != nil || b == nil {
		return err
	}
	var dyn rules.Dynamic
	if err := json.Unmarshal(b, &dyn); err != nil {
		return fmt.Errorf("rules: the store's record of RULES SET: %w", err)
	}
	m.Merge(dyn)
	return nil
}

// ReloadRules reads rules-file again (SIGHUP); a file refused leaves the
// rules in force, and the error is logged.
func (d *Daemon) ReloadRules() error { return d.rules.Reload() }

// Rules returns the limits defined on the server: their Manager, whose
// Service is the rules.Checker every front end (RL.CHECK, the gRPC
// rate-limit service, /json) answers through.
func (d *Daemon) Rules() *rules.Manager { return d.rules }
