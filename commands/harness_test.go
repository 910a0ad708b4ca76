package commands

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
)

const now0 = int64(1_700_000_000_000_000_000)

// fakeHost is a Host with one engine on a manual clock.
type fakeHost struct {
	eng      *engine.Engine
	clock    *engine.ManualClock
	pass     string
	clients  []*Client
	settings map[string]string
	shutdown int
	logs     []string

	shutdownSave bool
	persist      *fakePersistence // nil: persistence off
	queryMax     int64            // QueryBufferLimit; 0: 1024
}

func (h *fakeHost) Engine() *engine.Engine          { return h.eng }
func (h *fakeHost) DebugClock() *engine.ManualClock { return h.clock }
func (h *fakeHost) RequirePass() string             { return h.pass }
func (h *fakeHost) Clients() []*Client              { return h.clients }
func (h *fakeHost) QueryBufferLimit() int64 {
	if h.queryMax > 0 {
		return h.queryMax
	}
	return 1024
}
func (h *fakeHost) ConfigGet(p string) [][2]string {
	var out [][2]string
	for k, v := range h.settings {
		if Match(p, k) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
func (h *fakeHost) ConfigSet(pairs [][2]string) (int, error) {
	for i, p := range pairs {
		if _, ok := h.settings[p[0]]; !ok {
			return i, ErrUnknownSetting
		}
		if p[1] == "bad" {
			return i, errors.New("argument couldn't be parsed into an integer")
		}
	}
	for _, p := range pairs {
		h.settings[p[0]] = p[1]
	}
	return 0, nil
}
func (h *fakeHost) Stats() HostStats { return HostStats{Started: time.Now(), MaxClients: 10} }
func (h *fakeHost) ResetStats()      {}
func (h *fakeHost) RequestShutdown(save bool) {
	h.shutdown++
	h.shutdownSave = save
}
func (h *fakeHost) Replication() Replication { return nil }
func (h *fakeHost) Persistence() Persistence {
	if h.persist == nil {
		return nil // not a typed nil
	}
	return h.persist
}
func (h *fakeHost) ConfigRewrite() error {
	return ErrNoConfigFile
}
func (h *fakeHost) Logf(level, format string, args ...any) {
	h.logs = append(h.logs, level+": "+fmt.Sprintf(format, args...))
}

type harness struct {
	t      testing.TB
	host   *fakeHost
	table  *Table
	out    *bytes.Buffer
	c      *Client
	now    time.Time       // the table's clock (Options.Now)
	sleeps []time.Duration // what the table asked to sleep (Options.Sleep), in order
}

func newHarness(t testing.TB, pass string) *harness {
	t.Helper()
	clock := engine.NewManualClock(now0)
	eng, err := engine.New(engine.Config{Shards: 4, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{eng: eng, clock: clock, pass: pass, settings: map[string]string{"maxclients": "10", "save": ""}}
	hs := &harness{t: t, host: h, out: &bytes.Buffer{}, now: time.Unix(1_700_000_000, 0)}
	hs.table = NewTable(h, Options{EnableDebug: true,
		Now:   func() time.Time { return hs.now },
		Sleep: func(d time.Duration, _ <-chan struct{}) { hs.sleeps = append(hs.sleeps, d) }})
	hs.c = hs.table.NewClient(ClientOptions{ID: 7, Addr: "127.0.0.1:5000", LocalAddr: "127.0.0.1:6379",
		Writer: NewWriter(hs.out), Authorized: pass == ""})
	h.clients = []*Client{hs.c}
	return hs
}

// do runs one command given as words and returns the raw RESP reply.
func (h *harness) do(words ...string) string {
	h.t.Helper()
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	h.table.Dispatch(h.c, args)
	if err := h.c.W.Flush(); err != nil {
		h.t.Fatal(err)
	}
	s := h.out.String()
	h.out.Reset()
	return s
}

// ints and errReply are the kit's encoders of an array of integers and of
// an error.
var ints, errReply = testkit.Ints, testkit.Err

// fakePersistence records what commands ask of it.
type fakePersistence struct {
	saves, bgsaves int
	fail           bool // Save fails
	inProgress     bool // a background save is under way
	info           PersistenceInfo
	backups        []string // the paths Backup was given
	backupErr      error    // what Backup returns
	backupLocal    []bool   // the local argument of each Backup
}

func (p *fakePersistence) Save() error {
	p.saves++
	if p.fail {
		return errors.New("disk full")
	}
	return nil
}

func (p *fakePersistence) BGSave(schedule bool) (bool, error) {
	if p.inProgress {
		if !schedule {
			return false, ErrSaveInProgress
		}
		return true, nil
	}
	p.bgsaves++
	return false, nil
}

func (p *fakePersistence) Backup(path string, local bool) error {
	p.backups = append(p.backups, path)
	p.backupLocal = append(p.backupLocal, local)
	return p.backupErr
}

func (p *fakePersistence) LastSave() time.Time   { return time.Unix(1_800_000_000, 0) }
func (p *fakePersistence) Info() PersistenceInfo { return p.info }

// usecs hides the durations of SLOWLOG GET's entries, which are the
// machine's: the third field of each becomes :U.
var usecs = regexp.MustCompile(`(\*6\r\n:\d+\r\n:\d+\r\n):\d+\r\n`)

func bulks(words ...string) string {
	var b strings.Builder
	b.WriteString("*" + itoaInt(len(words)) + "\r\n")
	for _, w := range words {
		b.WriteString("$" + itoaInt(len(w)) + "\r\n" + w + "\r\n")
	}
	return b.String()
}

func itoaInt(n int) string { return strconv.Itoa(n) }

// slowEntryReply is one SLOWLOG GET entry with its duration hidden.
func slowEntryReply(id string, args ...string) string {
	return "*6\r\n:" + id + "\r\n:1700000000\r\n:U\r\n" + bulks(args...) + "$14\r\n127.0.0.1:5000\r\n$0\r\n\r\n"
}
