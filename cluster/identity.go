package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// NodeFileName is the node file's name in dir, where package daemon keeps
// it when dir is set: Redis Cluster's nodes.conf, for cellserver's node.
const NodeFileName = "cluster-node.json"

// nodeFileVersion is the node file's format.
const nodeFileVersion = 1

// Identity is what a node keeps across restarts in its node file
// (Config.NodeFile): its id, whose slots the map gives back to it when it
// comes back, and the address it announced.
type Identity struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	IP      string `json:"ip"`
	Port    int    `json:"port"`
	BusPort int    `json:"bus_port"`
	// Epoch is kept for the agreement on the slot map: the last epoch
	// this node took part in. Nothing sets it yet; a file written with
	// it is read back with it.
	Epoch int64 `json:"epoch,omitempty"`
}

// ErrNodeFile is wrapped by the error New returns for a node file that
// does not read as one.
var ErrNodeFile = errors.New("cluster: damaged node file")

// readIdentity reads the node file at path; ok is false when there is
// none. A file that does not parse, or whose id is not 40 hex
// characters, is an error wrapping ErrNodeFile that names the file.
func readIdentity(path string) (id Identity, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("cluster: node file %s: %w", path, err)
	}
	damaged := func(why string) error {
		return fmt.Errorf("%w %s: %s (to start as a new node, with a new id, move it aside: mv %s %s.damaged)", ErrNodeFile, path, why, path, path)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return Identity{}, false, damaged(err.Error())
	}
	if id.Version != nodeFileVersion {
		return Identity{}, false, damaged(fmt.Sprintf("format version %d, this build reads %d", id.Version, nodeFileVersion))
	}
	if !validID(id.ID) {
		return Identity{}, false, damaged(fmt.Sprintf("node id %q is not 40 hex characters", id.ID))
	}
	return id, true, nil
}

// writeIdentity writes id to the node file at path atomically: to a
// temporary file in the same directory, synced, then renamed over path,
// so that a crash leaves the old file or the new one, never a part.
func writeIdentity(path string, id Identity) error {
	id.Version = nodeFileVersion
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("cluster: writing the node file %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cluster: writing the node file %s: %w", path, err)
	}
	// The rename lasts once the directory is synced; where a directory
	// cannot be synced (Windows) the rename is as durable as it gets.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// loadIdentity takes the node id from the node file, when cfg names one
// that exists, before EnsureDefaults would draw a new one.
func (c *Config) loadIdentity() (prev Identity, found bool, err error) {
	if c.NodeFile == "" {
		return Identity{}, false, nil
	}
	prev, found, err = readIdentity(c.NodeFile)
	if err != nil || !found {
		return prev, found, err
	}
	if c.ID != "" && !equalFoldID(c.ID, prev.ID) {
		return prev, found, fmt.Errorf("%w: node id %s differs from %s's, %s", ErrConfig, c.ID, c.NodeFile, prev.ID)
	}
	c.ID = prev.ID
	return prev, found, nil
}

// equalFoldID compares two node ids, whose hex digits may differ in case.
func equalFoldID(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }

// validID reports whether id is a node id: 40 hex characters.
func validID(id string) bool {
	return len(id) == 40 && strings.Trim(strings.ToLower(id), "0123456789abcdef") == ""
}

// saveIdentity writes the node file, when cfg names one, if it did not
// exist (found false) or what it holds differs from cfg's (the announced
// address changed), and returns a line for the log about it. The epoch
// it held stays.
func (c *Config) saveIdentity(prev Identity, found bool) (note string, err error) {
	if c.NodeFile == "" {
		return "", nil
	}
	now := Identity{Version: nodeFileVersion, ID: c.ID, IP: c.IP, Port: c.Port, BusPort: c.BusPort, Epoch: prev.Epoch}
	switch {
	case found && now == prev:
		note = fmt.Sprintf("cluster: node id %s, from %s", c.ID, c.NodeFile)
	case found:
		note = fmt.Sprintf("cluster: node id %s, from %s; the node was at %s:%d@%d, now at %s:%d@%d", c.ID, c.NodeFile, prev.IP, prev.Port, prev.BusPort, c.IP, c.Port, c.BusPort)
	default:
		note = fmt.Sprintf("cluster: node id %s, new, kept in %s", c.ID, c.NodeFile)
	}
	if found && now == prev {
		return note, nil
	}
	return note, writeIdentity(c.NodeFile, now)
}

// releaseRetry is how often a release to a restarted member is tried
// until it is taken.
const releaseRetry = 500 * time.Millisecond

// restarted runs when member id gossips a start time other than the one
// it had: it restarted under its id (its node file) before this node saw
// it gone, so this node's map never left it, and it owns what it owned.
// But the restarted node does not know that: it starts as any node that
// joins does, waiting for each of its slots from the member that would
// own it without it (Start's previous map), for up to PendingTimeout.
// This node therefore sends it, for each of those slots it is that member
// of and does not serve, a hand-off of no keys, as its release, and the
// restarted node serves them at once, with the keys it holds (restored).
// The release is an ordinary hand-off message: the protocol is unchanged.
// A slot this node holds as its replica (replicas.go) goes with the
// copy's records rather than empty: the restarted node catches up on
// what it served before it crashed, and the copy is then asked for anew.
func (n *Node) restarted(id string) {
	if n.stopping() {
		return
	}
	n.releasing.Add(1)
	go func() {
		defer n.releasing.Done()
		for try := 0; ; try++ {
			err := n.release(id)
			if err == nil || n.stopping() || try*int(releaseRetry) >= int(n.cfg.PendingTimeout) {
				if err != nil {
					n.logf("verbose", "cluster: releasing slots to %s, which restarted: %v", id, err)
				}
				return
			}
			select {
			case <-n.stop:
				return
			case <-time.After(releaseRetry):
			}
		}
	}()
}

// release sends member id the empty hand-offs restarted describes; it
// reports the first failure (the member does not listen yet, say).
func (n *Node) release(id string) error {
	t := n.routes.Load()
	md, ok := t.members[id]
	if !ok {
		return nil // gone: it joins again, as any node
	}
	var others []Member
	for mid, m := range t.members {
		if mid != id && !m.Leaving {
			others = append(others, Member{ID: mid, Weight: m.Weight})
		}
	}
	without := Assign(others)
	var payload []byte
	sections := 0
	flush := func() error {
		if sections == 0 {
			return nil
		}
		err := n.send(n.linkAddr(md), id, payload, formatFlags(n.isLeaving(), false, false, false))
		payload, sections = payload[:0], 0
		return err
	}
	released := 0
	var copies []int
	for s := range engine.SlotCount {
		if t.m.OwnerID(s) != id || without.OwnerID(s) != n.cfg.ID {
			continue
		}
		switch n.slots[s].state.Load() {
		case notMine:
		case replica:
			copies = append(copies, s)
			continue
		default:
			continue
		}
		payload = appendSection(payload, s, 0, nil)
		sections++
		released++
		if sections == maxSections {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if len(copies) > 0 {
		if err := n.sendCopies(n.linkAddr(md), id, copies, false); err != nil {
			return err
		}
		n.mu.Lock()
		for _, s := range copies {
			n.rsub[s] = "" // asked for again, from the restarted owner
			n.rsynced[s].Store(false)
		}
		n.mu.Unlock()
		released += len(copies)
		n.logf("verbose", "cluster: %s restarted; sent it this node's replica copies of %d of its slots", id, len(copies))
	}
	if released > 0 {
		n.logf("verbose", "cluster: %s restarted; released its %d slots this node would own without it", id, released)
	}
	return nil
}
