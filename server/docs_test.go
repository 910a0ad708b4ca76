package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/commands"
)

// The reference (docs/commands.md) and the README keep up with the
// settings table and the command table: a setting or command added to
// either without its row in the docs fails these tests, naming it.

// readDoc returns the file at path, relative to the repository's root.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the lines of doc under the first heading whose text
// contains title, up to the next heading of the same or a higher level.
func section(t *testing.T, doc, title string) []string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || !strings.HasPrefix(l[level:], " ") || !strings.Contains(l, title) {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if n := len(lines[j]) - len(strings.TrimLeft(lines[j], "#")); n > 0 && n <= level && strings.HasPrefix(lines[j][n:], " ") {
				end = j
				break
			}
		}
		return lines[i+1 : end]
	}
	t.Fatalf("no heading with %q", title)
	return nil
}

var quoted = regexp.MustCompile("`([^`]+)`")

// rowNames returns the names a section's table rows are for: each
// `quoted` word in a row's first cell (a row may name several, as
// "`logfile` / `pidfile`"), in lower case, up to its first space
// ("`DEBUG CLOCK SET unix_ns`" is debug's).
func rowNames(lines []string) map[string]bool {
	names := map[string]bool{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cell, _, _ := strings.Cut(l[1:], "|")
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			name, _, _ := strings.Cut(m[1], " ")
			names[strings.ToLower(name)] = true
		}
	}
	return names
}

// Every setting of the settings table has its row in the reference's
// settings table (§16) and in the README's.
func TestSettingsAreDocumented(t *testing.T) {
	for _, doc := range []struct{ path, title string }{
		{"docs/commands.md", "Settings"},
		{"README.md", "Settings"},
	} {
		rows := rowNames(section(t, readDoc(t, doc.path), doc.title))
		for _, s := range settings {
			if !rows[s.name] {
				t.Errorf("setting %q has no row in %s's %q table", s.name, doc.path, doc.title)
			}
		}
	}
}

// Every command the command table registers, DEBUG included, has its row
// in the reference's command table (§15).
func TestCommandsAreDocumented(t *testing.T) {
	rows := rowNames(section(t, readDoc(t, "docs/commands.md"), "Command table"))
	table := commands.NewTable(newTestServer(t), commands.Options{EnableDebug: true})
	names := table.Names()
	if len(names) == 0 {
		t.Fatal("the command table lists no command")
	}
	for _, name := range names {
		if !rows[strings.ToLower(name)] {
			t.Errorf("command %q has no row in docs/commands.md's command table", name)
		}
	}
}
