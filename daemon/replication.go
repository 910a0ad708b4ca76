package daemon

import (
	"crypto/tls"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/server"
)

var (
	_ commands.Replication = (*replication.Replication)(nil)
	_ server.Replication   = (*replication.Replication)(nil)
)

// wireReplication builds the server's replication from its settings and
// hands it to the server; with replicaof set, the server starts as a
// replica of that primary.
func wireReplication(d *Daemon, srv *server.Server, scfg server.Config) *replication.Replication {
	var clientTLS *tls.Config
	if srvTLS := scfg.TLSConfig; srvTLS != nil {
		// The replica dials with the server's own certificate, reloaded as
		// the server's is (for a primary that checks clients), and checks
		// the primary's against tls-ca-cert-file's CAs (the system's
		// without it), with the primary's host name.
		clientTLS = &tls.Config{
			RootCAs:    srvTLS.ClientCAs,
			MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if srvTLS.GetCertificate != nil {
					return srvTLS.GetCertificate(nil)
				}
				if len(srvTLS.Certificates) > 0 {
					return &srvTLS.Certificates[0], nil
				}
				return &tls.Certificate{}, nil
			},
		}
	}
	ttl := time.Duration(scfg.ReplBacklogTTL) * time.Second
	if ttl == 0 {
		ttl = -1 // repl-backlog-ttl 0: never freed
	}
	r := replication.New(srv.Engine(), replication.Config{
		BacklogSize: int(scfg.ReplBacklogSize),
		BacklogTTL:  ttl,
		Timeout:     time.Duration(scfg.ReplTimeout) * time.Second,
		Logf:        srv.Logf,
		TLS:         clientTLS,
		ClusterMode: scfg.ClusterEnabled,
		SetReadOnly: srv.SetReadOnly,
		OnReplicaOf: srv.SetReplicaOf,
		OnLink:      srv.AddMasterLink,
		SetLoading:  srv.SetLoading,
		Rules:       d.replicaRules,
		SetRules:    d.setReplicaRules,
		Settings: func() replication.Settings {
			c := srv.CurrentConfig()
			port := c.Port
			if c.TLSReplication && c.TLSPort != 0 {
				port = c.TLSPort
			}
			return replication.Settings{
				MasterAuth: c.MasterAuth, MasterUser: c.MasterUser,
				ReadOnly: c.ReplicaReadOnly, Priority: c.ReplicaPriority, Announced: c.ReplicaAnnounced,
				AnnounceIP: c.ReplicaAnnounceIP, AnnouncePort: c.ReplicaAnnouncePort,
				ListeningPort: port, TLS: c.TLSReplication,
			}
		},
	})
	srv.SetReplication(r)
	return r
}

// startReplica makes the server a replica of the primary its replicaof
// setting names, if any.
func startReplica(r *replication.Replication, scfg server.Config) error {
	host, port, ok := server.ParseReplicaOf(scfg.ReplicaOf)
	if !ok {
		return nil
	}
	_, err := r.ReplicaOf(host, port)
	return err
}
