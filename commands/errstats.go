package commands

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cellserver/cellserver/engine"
)

// errorStats counts the error replies by their first word ("ERR",
// "WRONGTYPE", "NOAUTH", "Cell", …) for INFO's errorstats section, as
// Redis 7 does: at most maxErrorKinds distinct words, the errors of any
// further word counted under errorStatsOverflow. Every Writer of a
// table's clients counts into the table's one errorStats through
// WriteError; a reply without error pays nothing.
type errorStats struct {
	mu     sync.Mutex
	counts map[string]int64
}

const (
	maxErrorKinds      = 128
	errorStatsOverflow = "ERRORSTATS_OVERFLOW"
)

// note counts the error reply msg.
func (e *errorStats) note(msg string) {
	word, _, _ := strings.Cut(msg, " ")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = make(map[string]int64)
	}
	if _, ok := e.counts[word]; !ok && len(e.counts) >= maxErrorKinds {
		word = errorStatsOverflow
	}
	e.counts[word]++
}

// reset zeroes the counts (CONFIG RESETSTAT).
func (e *errorStats) reset() {
	e.mu.Lock()
	e.counts = nil
	e.mu.Unlock()
}

// infoErrorstats is Redis's errorstats section: one line per error word
// seen, errorstat_<word>:count=<n>, by word.
func infoErrorstats(c *Client, b *strings.Builder, _ HostStats, _ engine.Stats) {
	e := &c.table.errors
	e.mu.Lock()
	words := make([]string, 0, len(e.counts))
	for w := range e.counts {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		b.WriteString("errorstat_" + w + ":count=" + strconv.FormatInt(e.counts[w], 10) + "\r\n")
	}
	e.mu.Unlock()
}
