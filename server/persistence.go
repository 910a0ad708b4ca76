package server

import "github.com/cellserver/cellserver/commands"

// Persistence is what a server needs of its snapshots (package persist,
// wired in by package daemon): what commands use, plus applying CONFIG SET
// save and closing at shutdown.
type Persistence interface {
	commands.Persistence
	// SetSaveRules applies a save setting (Config.SaveRules' form).
	SetSaveRules(rules string) error
	// Close stops the snapshots and closes the store.
	Close() error
}

// SetPersistence turns persistence on with p; call it before serving. The
// server then takes a last snapshot at shutdown (unless SHUTDOWN NOSAVE)
// and closes p. The engine must track changes: Config.Dir must be set.
func (s *Server) SetPersistence(p Persistence) { s.persist = p }

// SetLoading sets whether the server is loading its keys from disk: while
// it is, INFO says loading:1 and the limiter and keyspace commands are
// answered with Redis's LOADING error.
func (s *Server) SetLoading(on bool) { s.table.SetLoading(on) }

// Loading reports whether the server is loading its keys (SetLoading).
func (s *Server) Loading() bool { return s.table.Loading() }

// closePersistence takes the last snapshot, unless SHUTDOWN NOSAVE asked
// otherwise, and closes the store.
func (s *Server) closePersistence() {
	p := s.persist
	if p == nil {
		return
	}
	if s.saveOnShutdown.Load() && !s.table.Loading() {
		s.log.Logf("notice", "Saving the final snapshot before exiting.")
		if err := p.Save(); err != nil {
			s.log.Logf("warning", "Error saving the final snapshot: %v", err)
		} else {
			s.log.Logf("notice", "DB saved on disk")
		}
	}
	if err := p.Close(); err != nil {
		s.log.Logf("warning", "Closing the snapshot store: %v", err)
	}
}
