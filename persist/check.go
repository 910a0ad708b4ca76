package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"slices"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// genName is the file, in the store's directory beside Pebble's, that
// holds the generation of the last snapshot committed: the store's own
// record of how far its snapshots got, outside Pebble's log. A damaged
// or truncated log makes Pebble open on an earlier state without an
// error (it cannot tell a damaged last record from one a crash cut
// short, and in some cases drops every record after a damaged one);
// Open compares the store's generation with this file's and refuses a
// store that holds less than was committed (check).
//
// It holds the generation (8 bytes, big-endian) then the CRC-32 (IEEE)
// of those 8 bytes, overwritten in place after each commit, and not
// synced: the check needs only that the file never says more than the
// store holds, which writing it after the commit (synced) ensures. A
// power cut may leave an older generation in it (a weaker check at the
// next start, never a false refusal); a process crash leaves the write to
// the page cache. Syncing it, or replacing it by a rename, would cost a
// small snapshot several times its own time (BenchmarkSnapshotSmall).
const genName = "CELLSERVER-GENERATION"

// writeGenFile records gen in the store's generation file; s.mu is held.
func (s *Store) writeGenFile(gen uint64) error {
	f, err := s.opts.FS.OpenReadWrite(s.opts.FS.PathJoin(s.dir, genName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	b := binary.BigEndian.AppendUint64(nil, gen)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	_, err = f.WriteAt(b, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readGenFile returns the generation in the store's generation file, or 0
// (nothing to check against) when there is none, as in a store from a
// backup or one written before the file was, or when it is damaged, which
// it logs: the file guards the store and holds none of its data, and a
// power cut in the middle of its unsynced write may leave it torn, so
// refusing a store for it could refuse a whole one.
func (s *Store) readGenFile() (uint64, error) {
	path := s.opts.FS.PathJoin(s.dir, genName)
	b, err := readAll(s.opts.FS, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("persist: read %s: %w", path, err)
	}
	if len(b) != 12 || crc32.ChecksumIEEE(b[:8]) != binary.BigEndian.Uint32(b[8:]) {
		s.opts.Logf("warning", "persist: %s is damaged (%d bytes, bad length or checksum): the store's generation is not checked against it; the next snapshot writes it again", path, len(b))
		return 0, nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// readAll returns the first 64 KiB of the file path.
func readAll(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// logFiles names the store's Pebble log files, for an error.
func (s *Store) logFiles() string {
	names, _ := s.opts.FS.List(s.dir)
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, s.opts.FS.PathJoin(s.dir, n))
		}
	}
	slices.Sort(logs)
	if len(logs) == 0 {
		return "none left"
	}
	return strings.Join(logs, ", ")
}

// check reads a store that exists before Open opens it for writing, with
// Pebble opened read-only, so that a store it refuses is left as it was
// (Pebble opened for writing would flush what it recovered from a damaged
// log and delete the log): Pebble's OPTIONS file against the options the
// store is opened with, its log, every block of every table against its
// checksum (verifyTables), and the generation against the one last
// committed (genName). Each failure is an error wrapping ErrCorrupt that
// names the file (for a log Pebble replays, the logs), or ErrUnknownFormat
// for a store of a newer cellserver or Pebble format.
func (s *Store) check() error {
	fsys := s.opts.FS
	want, err := s.readGenFile()
	if err != nil {
		return err
	}
	desc, err := pebble.Peek(s.dir, fsys)
	if err != nil {
		return s.readErr(newFatalNote(), err)
	}
	if !desc.Exists {
		if want > 0 {
			return fmt.Errorf("%w: %s: Pebble finds no store (its marker.manifest file or its MANIFEST is missing), but %s says snapshot %d was committed",
				ErrCorrupt, s.dir, genName, want)
		}
		return nil
	}
	if desc.OptionsFilename != "" {
		path := desc.OptionsFilename // joined to s.dir
		b, err := readAll(fsys, path)
		if err == nil {
			err = s.pebbleOptions(newFatalNote(), nil).CheckCompatibility(s.dir, string(b))
		}
		if err != nil {
			return fmt.Errorf("%w: %s: corrupt file %s: %v", ErrCorrupt, s.dir, path, err)
		}
	}
	logs := s.logFiles() // before Pebble replays them
	if err := s.open(true); err != nil {
		// Pebble's other refusals of a store that exists (a table's size
		// against the MANIFEST's, say) are damage too; a permission is not.
		switch {
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrUnknownFormat), errors.Is(err, fs.ErrPermission):
		case transient(err):
			// Not the store's fault: store-damaged move-aside must not
			// act on it.
			return fmt.Errorf("persist: %s: cannot read the store: %w", s.dir, err)
		default:
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if strings.Contains(err.Error(), "WAL") {
			// Pebble names the log only in the error's details.
			err = fmt.Errorf("%w (Pebble's logs: %s)", err, logs)
		}
		return err
	}
	defer s.shut()
	if err := s.verifyTables(); err != nil {
		return err
	}
	if got, _ := s.LastSave(); got < want {
		return fmt.Errorf("%w: %s: the store holds snapshot %d but snapshot %d was committed (%s): Pebble's log (%s) is damaged or truncated",
			ErrCorrupt, s.dir, got, want, genName, logs)
	}
	return nil
}

// transient reports whether err is the system's refusal of an operation
// (too many open files, no memory, an I/O error, a full disk) rather than
// something found in the store's files: an error number other than "no
// such file", which a file the store refers to and lacks is. Such an
// error stops the start as any other, but it is not damage: the same
// store may open a moment later, so it must not be moved aside.
func transient(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && !errors.Is(errno, fs.ErrNotExist) && !pebble.IsCorruptionError(err)
}
