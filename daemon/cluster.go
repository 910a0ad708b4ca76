package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
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
	cc.Forward = cfg.ClusterForward
	cc.NodeTimeout = time.Duration(cfg.ClusterNodeTimeout) * time.Millisecond
	cc.RequireMajority = cfg.ClusterRequireMajority
	cc.Replicas = cfg.ClusterReplicas
	if cfg.TLSCluster {
		if cfg.TLSConfig == nil {
			return nil, errors.New("cluster mode: tls-cluster needs tls-port and its certificate")
		}
		cc.TLS, cc.TLSPort = linkTLS(cfg.TLSConfig), cfg.TLSPort
	}
	cc.Local = isLoopback(cc.IP)
	if cfg.Dir != "" {
		// The node's id lasts across restarts, as Redis's nodes.conf.
		cc.NodeFile = filepath.Join(cfg.Dir, cluster.NodeFileName)
	}
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

// linkTLS is the TLS configuration of the node's links to its peers
// (tls-cluster), from the server's: the server's certificate is the
// link's client certificate, and the peer's certificate must chain to the
// server's CAs (tls-ca-cert-file) when there are some. Peers are dialed
// at the address they announce, which their certificate need not name:
// the chain is checked without the host name, as Redis checks its
// cluster bus, and the link handshake proves the cluster secret besides.
// Without CAs no certificate is checked: the handshake, whose MACs are
// bound to the TLS session (cluster/link.go), is then what authenticates
// the peer, and a man in the middle who ends TLS on both sides cannot
// relay it; the node sends nothing else on a session before the peer has
// proved the secret on it.
func linkTLS(srv *tls.Config) *tls.Config {
	roots := srv.ClientCAs
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if srv.GetCertificate != nil {
				return srv.GetCertificate(nil)
			}
			if len(srv.Certificates) > 0 {
				return &srv.Certificates[0], nil
			}
			return &tls.Certificate{}, nil // none: the peer may not ask for one
		},
		// Checked below without the host name.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if roots == nil {
				return nil
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			if len(certs) == 0 {
				return errors.New("cluster link: the peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			return err
		},
	}
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
	cs := metrics.ClusterStats{KeysOut: st.KeysOut, KeysIn: st.KeysIn, SlotsServed: st.SlotsServed, Members: st.Members,
		NodesPFail: st.NodesPFail, NodesFail: st.NodesFail, SlotsPFail: st.SlotsPFail, SlotsFail: st.SlotsFail, StateOK: st.StateOK}
	addReplicaStats(&cs, m.node.Topology())
	return cs, true
}

// addReplicaStats adds to cs the figures of top that CLUSTER INFO reports
// too: the epoch, the majority, and the replicas' slots and streams.
func addReplicaStats(cs *metrics.ClusterStats, top commands.ClusterTopology) {
	cs.Epoch = top.Epoch
	cs.SeesMajority = !top.Agreement || top.SeesMajority
	cs.ReplicaSlots, cs.ReplicaSlotsSyncing = top.ReplicaSlots, top.ReplicaSlotsSyncing
	streams := func(ss []commands.ReplicaStream) []metrics.ClusterStream {
		out := make([]metrics.ClusterStream, 0, len(ss))
		for _, s := range ss {
			last := time.Duration(s.LastMs) * time.Millisecond
			if s.LastMs < 0 {
				last = -1 // no message yet (package cluster's -1)
			}
			out = append(out, metrics.ClusterStream{Peer: s.ID, LagChanges: s.Lag, LastMessage: last})
		}
		return out
	}
	cs.ReplOut, cs.ReplIn = streams(top.ReplOut), streams(top.ReplIn)
}
