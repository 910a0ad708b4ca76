package cluster

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// BusPortOffset is what a node's gossip port adds to its client port
// unless it is set: Redis Cluster's bus port convention.
const BusPortOffset = 10000

// Config configures a Node. Start from DefaultConfig and set IP, Port and
// Secret at least.
type Config struct {
	// ID is this node's id, 40 hex characters as Redis's. Default: the
	// id in NodeFile when it exists, else random.
	ID string
	// NodeFile, when set, is the file the node keeps its identity in
	// across restarts (its id and address; see Identity): New reads the
	// id from it, or writes it there when the file does not exist yet,
	// so that a node restarted with the same file comes back as the same
	// member and owns the same slots. A file that does not read stops
	// New with an error naming it. Package daemon sets it to
	// NodeFileName in dir when dir is set. Default: "", none kept.
	NodeFile string
	// IP is the address clients and peers reach this node at
	// (cluster-announce-ip). Required.
	IP string
	// Port is the client port clients and peers reach this node at
	// (cluster-announce-port). Required.
	Port int
	// BindAddr is the address memberlist listens on. Default: IP.
	BindAddr string
	// BusPort is the gossip port (cluster-port), TCP and UDP, on BindAddr
	// and announced with IP. Default: Port + BusPortOffset.
	BusPort int
	// Join is the members to join through at start (cluster-join), each
	// "host:port" naming a member's client port, whose gossip port is
	// port + BusPortOffset, or "host:port@busport". Default: none, and the
	// node starts as a cluster of one that serves every slot.
	Join []string
	// Secret is the shared cluster secret (cluster-secret): memberlist's
	// keyring key (AES-256-GCM gossip) and the HMAC key that
	// authenticates hand-offs. Required.
	Secret string
	// Weight is this node's share of the slots relative to the others'
	// (1 each by default), from 0 (owns none) to MaxWeight; the slot map
	// counts no member's weight for more than MaxWeightRatio times the
	// members' median (see Assign). Default: 1.
	Weight float64
	// TLS, when set, makes every link to a peer (hand-offs and forwarded
	// commands; see link.go) a TLS connection to the peer's TLS port
	// (tls-cluster), with this configuration: the node's own certificate
	// as its client certificate, and the peers' certificates checked
	// against its CAs. Default: nil, links in clear to the client port.
	TLS *tls.Config
	// TLSPort is this node's TLS port, announced to the peers for their
	// links when they use TLS (tls-port). Default: 0, none.
	TLSPort int
	// Forward makes the node relay a command for a slot it does not serve
	// to the slot's owner and return the owner's reply unchanged, instead
	// of answering MOVED (cluster-forward). Default: false.
	Forward bool
	// HandoffTimeout bounds one hand-off message's round trip, and one
	// forwarded command's. Default: 10 s.
	HandoffTimeout time.Duration
	// PendingTimeout is how long a node that has gained a slot waits for
	// its previous owner, still alive, to hand it over before serving it
	// empty. Default: 30 s.
	PendingTimeout time.Duration
	// LeaveTimeout bounds Leave's hand-over of every slot. Default: 30 s.
	LeaveTimeout time.Duration
	// Local tunes gossip for one machine or a fast network (memberlist's
	// DefaultLocalConfig: faster probes and failure detection) instead of
	// a LAN (DefaultLANConfig). Default: false.
	Local bool
	// Logf, when set, receives the node's log lines at a level ("debug",
	// "verbose", "notice", "warning"). Default: nil, discarded.
	Logf func(level, format string, args ...any)
	// GossipMaxStreams is how many inbound gossip streams (memberlist's
	// TCP connections: state exchanges, joins, fallback pings) a node
	// serves at once; one over that is closed unread. Default: 32.
	GossipMaxStreams int
	// GossipMaxStreamBytes is the most a gossip stream may carry, read
	// before the cluster secret authenticates it; a longer one is
	// dropped. A state exchange carries about 250 bytes per member, so
	// the default, 512 KiB, holds about 2,000 members. Default: 512 KiB.
	GossipMaxStreamBytes int
	// NodeTimeout is cluster-node-timeout: how long a node may go without
	// seeing a majority of the cluster's members before it answers its
	// keyed commands -CLUSTERDOWN, and how long a member must have been
	// unreachable before the majority agrees to take its slots (agree.go).
	// Default: 15 s, as Redis's.
	NodeTimeout time.Duration
	// RequireMajority is cluster-require-majority: the members that own
	// slots are those a majority of the members agreed on (Raft, see
	// agree.go), and a node that sees no majority for NodeTimeout stops
	// serving. Off, the slot map is computed from the members gossip
	// reports live, as each node sees them, and a node never stops
	// serving: both sides of a partition serve every slot. Default: true.
	RequireMajority bool
	// Replicas is cluster-replicas: how many other members hold a copy of
	// each slot's state, streamed from its owner (replicas.go), chosen so
	// that the first is the member that owns the slot once its owner is
	// gone: it takes the slot over with the state it has. From 0 to
	// MaxReplicas. Default: 0, none.
	Replicas int
	// Transport, when set, carries the gossip in place of memberlist's own
	// TCP and UDP transport on BindAddr:BusPort: tests run several nodes
	// in one process on a memberlist.MockNetwork (internal/testkit's
	// Gossip), whose transports answer at 127.0.0.1:N, N being what
	// BusPort then is. Default: nil, memberlist's own.
	Transport memberlist.NodeAwareTransport
}

// MaxReplicas is the most cluster-replicas may be.
const MaxReplicas = 5

// DefaultConfig returns a complete configuration but for IP, Port and
// Secret.
func DefaultConfig() Config {
	return Config{
		Weight:         1,
		HandoffTimeout: 10 * time.Second,
		PendingTimeout: 30 * time.Second,
		LeaveTimeout:   30 * time.Second,
		NodeTimeout:    15 * time.Second,

		RequireMajority: true,

		GossipMaxStreams:     32,
		GossipMaxStreamBytes: 512 << 10,
	}
}

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("cluster: bad configuration")

// EnsureDefaults fills in the settings whose defaults derive from others
// (ID, BindAddr and BusPort), and the gossip limits left at 0.
func (c *Config) EnsureDefaults() {
	if c.GossipMaxStreams == 0 {
		c.GossipMaxStreams = DefaultConfig().GossipMaxStreams
	}
	if c.GossipMaxStreamBytes == 0 {
		c.GossipMaxStreamBytes = DefaultConfig().GossipMaxStreamBytes
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = DefaultConfig().NodeTimeout
	}
	if c.ID == "" {
		var b [20]byte
		_, _ = rand.Read(b[:])
		c.ID = hex.EncodeToString(b[:])
	}
	if c.BindAddr == "" {
		c.BindAddr = c.IP
	}
	if c.BusPort == 0 && c.Port > 0 && c.Port+BusPortOffset <= 65535 {
		c.BusPort = c.Port + BusPortOffset
	}
}

// Validate reports the first setting out of range.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if len(c.ID) != 40 || strings.Trim(strings.ToLower(c.ID), "0123456789abcdef") != "" {
		return bad("node id %q is not 40 hex characters", c.ID)
	}
	if net.ParseIP(c.IP) == nil {
		return bad("announce ip %q is not an IP address", c.IP)
	}
	if c.Port <= 0 || c.Port > 65535 || c.BusPort <= 0 || c.BusPort > 65535 {
		return bad("ports %d (clients) and %d (gossip) must be from 1 to 65535", c.Port, c.BusPort)
	}
	if c.Secret == "" {
		return bad("a cluster secret is required")
	}
	if !(c.Weight >= 0 && c.Weight <= MaxWeight) { // NaN too
		return bad("weight %v is not from 0 to %d", c.Weight, MaxWeight)
	}
	if c.Replicas < 0 || c.Replicas > MaxReplicas {
		return bad("replicas %d is not from 0 to %d", c.Replicas, MaxReplicas)
	}
	if c.GossipMaxStreams < 0 || c.GossipMaxStreamBytes < 0 {
		return bad("gossip limits must not be negative")
	}
	if c.TLS != nil && (c.TLSPort <= 0 || c.TLSPort > 65535) {
		return bad("links over TLS need the TLS port")
	}
	if c.HandoffTimeout <= 0 || c.PendingTimeout <= 0 || c.LeaveTimeout <= 0 || c.NodeTimeout <= 0 {
		return bad("timeouts must be positive")
	}
	for _, j := range c.Join {
		if _, err := GossipAddr(j); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// GossipAddr turns a member's address as cluster-join names it,
// "host:port" (client port) or "host:port@busport", into its gossip
// address: host:busport, busport defaulting to port + BusPortOffset.
func GossipAddr(member string) (string, error) {
	addr, bus, hasBus := strings.Cut(member, "@")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("member %q: %w", member, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("member %q: bad port", member)
	}
	b := p + BusPortOffset
	if hasBus {
		if b, err = strconv.Atoi(bus); err != nil || b <= 0 {
			return "", fmt.Errorf("member %q: bad bus port", member)
		}
	}
	if b > 65535 {
		return "", fmt.Errorf("member %q: port+%d is over 65535; name the bus port as host:port@busport", member, BusPortOffset)
	}
	return net.JoinHostPort(host, strconv.Itoa(b)), nil
}
