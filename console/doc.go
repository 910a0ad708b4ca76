// Package console owns cellserver's web console: the page served at GET /
// on the HTTP address that also serves /metrics and the health endpoints,
// its assets (plain HTML, JavaScript and CSS embedded with embed.FS: no
// build step, nothing fetched from a network at run time), and the JSON
// API the page reads and scripts may use (/api/v1/...):
//
//   - overview: decisions per second by command and outcome, keys,
//     memory against maxmemory, clients, p50/p99 latency, snapshots and
//     cluster state, all read at request time from the counters the
//     server already keeps (server.Stats, the commands' counters, the
//     engine's Stats), so the request path pays nothing for the console;
//   - top: the keys most often limited lately (the engine's top-k, as
//     LIMITER.TOP answers), with their time to live;
//   - key: a key inspector (kind, time to live, and its state read with
//     a cost-0 call, which never charges);
//   - playground: runs a script of traffic against limiter.Parse and
//     limiter.Apply, the very functions the engine calls, on a virtual
//     clock and a private limiter.State: it never touches the keyspace.
//
// The console and its API ask for HTTP basic auth when requirepass is set
// and obey protected mode as the RESP port does (auth.go); everything but
// the playground only reads.
//
// It imports engine, limiter, commands (the counters' types) and metrics
// (the snapshot and cluster figures' types), and the standard library; it
// must not import server, daemon or cmd/cellserver: package daemon mounts
// it (Handler) over a Source the server implements. The charts are drawn
// by hand in inline SVG (about a hundred lines of JavaScript) rather than
// with a charting library, to keep the page free of a build step and of
// any third-party asset.
package console
