// Package rules owns limits defined on the server: rule sets in
// envoyproxy/ratelimit's YAML format (and cellserver's extensions), the
// matching of request descriptors to limits, and the Checker that the
// RESP command RL.CHECK and the gRPC rate-limit service both answer
// through.
//
// It imports the limiter package and a YAML library, and must not import
// engine, commands, server or anything above them.
package rules
