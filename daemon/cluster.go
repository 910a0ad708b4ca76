package daemon

import (
	"context"
	"errors"
	"net"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// newClusterNode builds the cluster node cfg's cluster settings describe
// and sets cfg.Router to it; it returns nil when cluster mode is off.
func newClusterNode(cfg *server.Config, logf func(level, format string, args ...any)) (*cluster.Node, error) {
	if !cfg.ClusterEnabled {
		return nil, nil
	}
	cc := cluster.DefaultConfig()
	cc.IP, cc.Port = cfg.ClusterAnnounceIP, cfg.ClusterAnnouncePort
	bind, _ := server.BindHost(cfg.Bind[0])
	if cc.IP == "" {
		cc.IP = bind
		if ip := net.ParseIP(cc.IP); ip != nil && ip.IsUnspecified() {
			return nil, errors.New("cluster mode: bind is a wildcard address; set cluster-announce-ip")
		}
	}
	if cc.Port == 0 {
		cc.Port = cfg.Port
	}
	if cc.Port == 0 {
		return nil, errors.New("cluster mode: port 0 cannot be announced; set port or cluster-announce-port")
	}
	cc.BindAddr = bind
	cc.BusPort = cfg.ClusterPort
	if cc.BusPort == 0 {
		cc.BusPort = cfg.Port + cluster.BusPortOffset
	}
	cc.Join, cc.Secret, cc.Weight = cfg.ClusterJoin, cfg.ClusterSecret, cfg.ClusterWeight
	cc.Password, cc.Forward = cfg.RequirePass, cfg.ClusterForward
	cc.Local = isLoopback(cc.IP)
	cc.Logf = logf
	n, err := cluster.New(cc)
	if err != nil {
		return nil, err
	}
	// The hand-off connections' client, go-redis, logs through a logger of
	// its own for the whole process, to stderr: into the server's log.
	redis.SetLogger(redisLogger(logf))
	cfg.Router = n
	return n, nil
}

// redisLogger is go-redis's logger writing to the server's log, at
// verbose level: what it says (a peer that does not answer) the node
// reports itself when it matters.
type redisLogger func(level, format string, args ...any)

func (l redisLogger) Printf(_ context.Context, format string, args ...any) {
	if l != nil {
		l("verbose", "cluster: "+format, args...)
	}
}

// isLoopback reports whether ip is a loopback address: a cluster on one
// machine gossips with memberlist's fast local timings.
func isLoopback(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.IsLoopback()
}

// Cluster reports the cluster node's counters, when cluster mode is on.
func (m metricsSource) Cluster() (metrics.ClusterStats, bool) {
	if m.node == nil {
		return metrics.ClusterStats{}, false
	}
	st := m.node.Stats()
	return metrics.ClusterStats{KeysOut: st.KeysOut, KeysIn: st.KeysIn, SlotsServed: st.SlotsServed, Members: st.Members}, true
}
