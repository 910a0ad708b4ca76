package rules

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Service is the Checker whose rules the Manager keeps. Required.
	Service *Service
	// File is rules-file: a YAML file of one domain, or a directory whose
	// *.yaml and *.yml files (not those starting with a dot) hold one
	// domain each. "": no file; only RULES SET defines domains.
	File string
	// Logf logs at a level ("notice", "warning"). Default: nothing.
	Logf func(level, format string, args ...any)
	// Now is the time a set is stamped with. Default: time.Now.
	Now func() time.Time
	// OnChange is called, outside the Manager's lock, with the domains
	// defined over RESP after RULES SET or RULES DEL changed them (not
	// after Merge): persistence saves them and the cluster spreads them.
	// Default: nil.
	OnChange func(Dynamic)
	// NodeID names this node in Dynamic.Node. Default: "".
	NodeID string
}

// Dynamic is the domains defined with RULES SET, as a whole: the version
// (bumped by every RULES SET and RULES DEL) and the node that made it
// order two copies, higher version first, then the greater node id, so
// every node of a cluster settles on the same one (Merge).
type Dynamic struct {
	Version uint64            `json:"version"`
	Node    string            `json:"node"`
	Domains map[string]string `json:"domains"` // domain → YAML
}

// newer reports whether d is to replace o.
func (d Dynamic) newer(o Dynamic) bool {
	if d.Version != o.Version {
		return d.Version > o.Version
	}
	return d.Node > o.Node
}

// Manager keeps the rules in force: it loads rules-file, reloads it
// (Reload, Watch), applies RULES SET and RULES DEL, and puts the merged
// set in force in its Service. A domain defined with RULES SET wins over
// the file's domain of the same name until RULES DEL removes it: an
// operator's change made now outranks a file written before it. It is
// safe for concurrent use.
type Manager struct {
	cfg ManagerConfig

	mu       sync.Mutex
	fileDoms map[string]*Domain
	fileSum  [32]byte // of the files last read, good or not
	fileErr  error    // the last reload's error (nil: it loaded)
	loadedAt time.Time
	reloads  int64
	failures int64
	dyn      Dynamic
	dynDoms  map[string]*Domain
}

// NewManager returns a Manager with no rules; call Reload to load the
// file.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Logf == nil {
		cfg.Logf = func(string, string, ...any) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, fileDoms: map[string]*Domain{}, dynDoms: map[string]*Domain{}}
}

// Service returns the Checker the Manager keeps the rules of.
func (m *Manager) Service() *Service { return m.cfg.Service }

// File returns rules-file ("": none).
func (m *Manager) File() string { return m.cfg.File }

// readFiles reads rules-file: the files' paths and contents, sorted by
// path.
func (m *Manager) readFiles() (paths []string, texts [][]byte, err error) {
	path := m.cfg.File
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(path)
		return []string{path}, [][]byte{b}, err
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		p := filepath.Join(path, n)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		paths, texts = append(paths, p), append(texts, b)
	}
	return paths, texts, nil
}

func sum(paths []string, texts [][]byte) [32]byte {
	h := sha256.New()
	for i := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00", paths[i], len(texts[i]))
		h.Write(texts[i])
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// Reload reads rules-file again and puts its rules in force; a file that
// does not parse or validate is refused, with the file, line and reason
// in the error and the log, and the rules in force stay. With no
// rules-file it only puts the RULES SET domains in force again.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reloadLocked(false)
}

// reloadLocked reloads the files; ifChanged: only when their contents
// changed since the last read.
func (m *Manager) reloadLocked(ifChanged bool) error {
	if m.cfg.File == "" {
		m.publishLocked()
		return nil
	}
	paths, texts, err := m.readFiles()
	if err == nil {
		s := sum(paths, texts)
		if ifChanged && s == m.fileSum {
			return nil
		}
		m.fileSum = s
	} else if ifChanged && m.fileErr != nil && m.fileErr.Error() == err.Error() {
		return nil
	}
	doms := map[string]*Domain{}
	if err == nil {
		for i := range paths {
			d, perr := Parse(paths[i], texts[i])
			if perr != nil {
				err = perr
				break
			}
			if prev := doms[d.Name]; prev != nil {
				err = &ConfigError{File: paths[i], Line: 1, Reason: fmt.Sprintf("duplicate domain '%s' (also in %s)", d.Name, prev.Source)}
				break
			}
			d.Source = paths[i]
			doms[d.Name] = d
		}
	}
	m.reloads++
	if err != nil {
		m.failures++
		m.fileErr = err
		m.cfg.Logf("warning", "rules: %s refused, the rules in force stay: %v", m.cfg.File, err)
		return err
	}
	m.fileErr, m.fileDoms = nil, doms
	m.publishLocked()
	m.cfg.Logf("notice", "rules: loaded %d domains from %s", len(doms), m.cfg.File)
	return nil
}

// publishLocked puts the file's domains and the RULES SET ones (which
// win) in force.
func (m *Manager) publishLocked() {
	all := make([]*Domain, 0, len(m.fileDoms)+len(m.dynDoms))
	for _, d := range m.fileDoms {
		all = append(all, d)
	}
	for _, d := range m.dynDoms {
		all = append(all, d)
	}
	m.loadedAt = m.cfg.Now()
	m.cfg.Service.SetRules(NewSet(m.loadedAt, all...))
}

// SourceRESP is the Source of a domain defined with RULES SET.
const SourceRESP = "RULES SET"

// SetDomain defines domain with the YAML text (RULES SET), validated as a
// file is; the text's domain must be domain.
func (m *Manager) SetDomain(domain string, text []byte) error {
	d, err := Parse(SourceRESP+" "+domain, text)
	if err != nil {
		return err
	}
	if d.Name != domain {
		return &ConfigError{File: SourceRESP + " " + domain, Line: 1, Reason: fmt.Sprintf("the text defines domain '%s', not '%s'", d.Name, domain)}
	}
	d.Source = SourceRESP
	m.mu.Lock()
	next := m.dyn.clone()
	next.Domains[domain] = string(text)
	m.commitLocked(next, map[string]*Domain{domain: d})
	m.mu.Unlock()
	m.changed(next)
	return nil
}

// DelDomain removes a domain RULES SET defined (RULES DEL); it reports
// false when there is none (a domain of the file stays: change the file).
func (m *Manager) DelDomain(domain string) bool {
	m.mu.Lock()
	if _, ok := m.dyn.Domains[domain]; !ok {
		m.mu.Unlock()
		return false
	}
	next := m.dyn.clone()
	delete(next.Domains, domain)
	m.commitLocked(next, nil)
	m.mu.Unlock()
	m.changed(next)
	return true
}

func (d Dynamic) clone() Dynamic {
	c := Dynamic{Version: d.Version, Node: d.Node, Domains: make(map[string]string, len(d.Domains)+1)}
	for k, v := range d.Domains {
		c.Domains[k] = v
	}
	return c
}

// commitLocked makes next (a local change) the RULES SET domains, with
// the version after the one in force; parsed holds domains already
// parsed.
func (m *Manager) commitLocked(next Dynamic, parsed map[string]*Domain) {
	next.Version = m.dyn.Version + 1
	next.Node = m.cfg.NodeID
	m.installLocked(next, parsed)
}

// installLocked makes d the RULES SET domains, parsing those not in
// parsed (a text that no longer parses is left out, and logged).
func (m *Manager) installLocked(d Dynamic, parsed map[string]*Domain) {
	doms := make(map[string]*Domain, len(d.Domains))
	for name, text := range d.Domains {
		dom := parsed[name]
		if dom == nil {
			if old := m.dynDoms[name]; old != nil && string(old.Text) == text {
				dom = old
			} else {
				var err error
				if dom, err = Parse(SourceRESP+" "+name, []byte(text)); err != nil {
					m.cfg.Logf("warning", "rules: domain %s left out: %v", name, err)
					continue
				}
				dom.Source = SourceRESP
			}
		}
		doms[name] = dom
	}
	m.dyn, m.dynDoms = d, doms
	m.publishLocked()
}

func (m *Manager) changed(d Dynamic) {
	if m.cfg.OnChange != nil {
		m.cfg.OnChange(d)
	}
}

// Merge takes the RULES SET domains from a snapshot or a peer: it puts
// them in force when they are newer than those in force (higher version,
// or the same version from a greater node id) and reports whether it did.
func (m *Manager) Merge(d Dynamic) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !d.newer(m.dyn) {
		return false
	}
	if d.Domains == nil {
		d.Domains = map[string]string{}
	}
	m.installLocked(d, nil)
	return true
}

// Replace puts d in force as the RULES SET domains whatever its version,
// at once: a replica takes its primary's as they are (package
// replication), older or newer than those it had.
func (m *Manager) Replace(d Dynamic) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.Domains == nil {
		d.Domains = map[string]string{}
	}
	m.installLocked(d, nil)
}

// Dynamic returns the RULES SET domains in force.
func (m *Manager) Dynamic() Dynamic {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dyn.clone()
}

// Watch reloads rules-file whenever its contents change, checking every
// interval until stop is closed. It reads the files and compares a hash
// of their names and contents rather than their modification times: that
// sees an edit within the same second, a file replaced by a rename or a
// symbolic link swapped (as Kubernetes updates a ConfigMap), which
// modification times and file-system events can miss, and the files are
// small. It returns at once when there is no rules-file.
func (m *Manager) Watch(stop <-chan struct{}, interval time.Duration) {
	if m.cfg.File == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.mu.Lock()
			_ = m.reloadLocked(true)
			m.mu.Unlock()
		}
	}
}

// Info is what RULES INFO and INFO rules report.
type Info struct {
	File      string
	Domains   int
	Rules     int
	Loaded    time.Time // when the set in force was put in force
	Reloads   int64     // reloads of rules-file tried
	Failures  int64     // of those, refused
	LastError string    // the last reload's error, "" when it loaded
	Version   uint64    // of the RULES SET domains
}

// Info returns the figures of the rules in force.
func (m *Manager) Info() Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.cfg.Service.Rules()
	in := Info{File: m.cfg.File, Domains: len(set.domains), Rules: set.NumRules(), Loaded: m.loadedAt,
		Reloads: m.reloads, Failures: m.failures, Version: m.dyn.Version}
	if m.fileErr != nil {
		in.LastError = m.fileErr.Error()
	}
	return in
}

// DomainNames returns the domains in force, sorted.
func (m *Manager) DomainNames() []string {
	var out []string
	for _, d := range m.cfg.Service.Rules().Domains() {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}
