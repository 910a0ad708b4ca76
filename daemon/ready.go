package daemon

import (
	"fmt"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// Ready is closed once the daemon serves: the server listens on its ports
// and the keys are restored (with persistence on) and the node has joined
// its cluster (in cluster mode); from then on commands are answered, not
// -LOADING. It is never closed when the daemon stops first. A supervisor
// learns of it through cmd/cellserver (supervised systemd: READY=1).
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Stopping is closed when the daemon begins to stop: Shutdown (before a
// cluster node hands its slots off), Close, SHUTDOWN, or a part that
// failed.
func (d *Daemon) Stopping() <-chan struct{} { return d.stopping }

// markStopping closes Stopping, once.
func (d *Daemon) markStopping() { d.stopOnce.Do(func() { close(d.stopping) }) }

// watchReady closes Ready once the server listens and loaded is closed,
// unless the daemon stops first, and closes Stopping when the server's
// shutdown begins.
func (d *Daemon) watchReady(loaded <-chan struct{}) {
	go func() {
		select {
		case <-d.srv.Stopping():
			d.markStopping()
		case <-d.stopping:
		}
	}()
	go func() {
		for _, c := range []<-chan struct{}{d.srv.Listening(), loaded} {
			select {
			case <-c:
			case <-d.stopping:
				return
			}
		}
		close(d.ready)
	}()
}

// readiness answers /readyz: whether the daemon serves (Ready, and not
// stopping), and in cluster mode whether every hash slot has an owner and
// this node serves each of its own; otherwise a short reason.
func (d *Daemon) readiness() (bool, string) {
	select {
	case <-d.stopping:
		return false, "shutting down"
	default:
	}
	if d.srv.Loading() {
		return false, "loading"
	}
	select {
	case <-d.ready:
	default:
		return false, "starting"
	}
	if d.node != nil {
		return clusterReady(d.node)
	}
	return true, ""
}

// clusterView is what clusterReady reads of a node: *cluster.Node's
// methods.
type clusterView interface {
	Started() bool
	Topology() commands.ClusterTopology
	Stats() cluster.Stats
}

var _ clusterView = (*cluster.Node)(nil)

// clusterReady reports whether every slot of the cluster has an owner and
// n serves every slot it owns (none waits for its previous owner's
// hand-off).
func clusterReady(n clusterView) (bool, string) {
	if !n.Started() {
		return false, "cluster: not joined"
	}
	top := n.Topology()
	if top.SlotsOK < engine.SlotCount {
		return false, fmt.Sprintf("cluster: %d of %d slots have no owner", engine.SlotCount-top.SlotsOK, engine.SlotCount)
	}
	own := 0
	for _, nd := range top.Nodes {
		if nd.Myself {
			for _, r := range nd.Slots {
				own += r[1] - r[0] + 1
			}
		}
	}
	if served := n.Stats().SlotsServed; served < own {
		return false, fmt.Sprintf("cluster: %d of this node's %d slots are not served yet (waiting for their hand-off)", own-served, own)
	}
	return true, ""
}
