// Package rules owns the limits defined on the server: rule sets in
// envoyproxy/ratelimit's YAML format and cellserver's extensions to it
// (config.go), the matching of a request's descriptors to rules
// (match.go), the Service that answers requests (service.go: the one
// place where descriptors are matched and counters charged, for RL.CHECK
// over RESP and the gRPC rate-limit service alike, through the Checker
// interface of api.go), the set in force (set.go), and the Manager that
// loads rules-file, reloads it, and keeps the domains RULES SET defines
// (manager.go). rulestest runs the transcripts of testdata/ against any
// front end.
//
// The semantics are envoyproxy/ratelimit's, as its source gives them
// where its README is silent: matching level by level (key and value,
// then the first wildcard in the file's order, then the value-less key),
// a rule counting only at the depth of the descriptor's last entry, no
// rule answering OK with no limit, unlimited answering OK with the most
// remaining a uint32 holds, hits_addend 0 meaning 1 (a descriptor's own
// 0 only reading), the fixed window counting every hit (over the limit
// too), shadow mode answering OK, replaces dropping a rule from a request,
// share_threshold sharing one counter among a wildcard's values, and its
// statistics (total_hits, over_limit, near_limit at a ratio of 0.8,
// within_limit, shadow_mode) under the same metric keys.
//
// The Service charges a rule's counter through a Store (the daemon's runs
// it on the local engine or forwards it to the slot's owner): the counter
// is an ordinary key of the rule's limiter kind, so every algorithm is the
// engine's own, and envoyproxy/ratelimit's fixed window is the FW kind
// with a limit so high that every hit is counted, the rule's limit being
// compared with the count after it. The key is "rl:{descriptor}:<rule
// hash>": the hash tag puts each descriptor on its own slot, and the hash
// of the rule's place and parameters keeps an unchanged rule's counters
// across reloads.
//
// The YAML is read by go.yaml.in/yaml/v3 (a file's keys checked against
// the format's, with their lines, through yaml.Node). Written here are the
// wildcard match (a few lines, as the reference service's), the metric
// keys (their rules are envoyproxy/ratelimit's own), and rules-file's
// watch, which polls the files' contents every 250 ms rather than using
// fsnotify: a poll sees a file replaced by a rename and a symbolic link
// swapped (a Kubernetes ConfigMap), which file-system events can miss, it
// works the same on every system, and the files are small.
//
// Package rules imports limiter and the YAML library; it must not import
// engine, commands, server, cluster or anything above them (its tests may).
package rules
