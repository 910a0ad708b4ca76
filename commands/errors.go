package commands

import (
	"strconv"
	"strings"
)

// Every reply error cellserver sends, with its prefix. Texts with a %s or
// %q verb are completed by the function next to their use.
const (
	// errPrefix and errCellPrefix begin an error of unforeseen text:
	// Redis's generic prefix, and redis-cell's (CL.THROTTLE).
	errPrefix     = "ERR "
	errCellPrefix = "Cell error: Store error: "

	// redis-cell's own texts (no ERR prefix).
	errCellUsage      = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	errCellParseInt   = "Cell error: Store error: Couldn't parse as integer: "
	errCellZeroRate   = "Cell error: Store error: Zero rates are not supported"
	errCellNegBurst   = "Cell error: Store error: max_burst must not be negative"
	errCellNegCount   = "Cell error: Store error: count must not be negative"
	errCellNegPeriod  = "Cell error: Store error: period must not be negative"
	errCellBurstRange = "Cell error: Store error: max_burst is out of range"
	errCellPeriodRng  = "Cell error: Store error: period is out of range"
	errCellQtyRange   = "Cell error: Store error: quantity is out of range"

	errWrongType     = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInteger    = "ERR value is not an integer or out of range"
	errSyntax        = "ERR syntax error"
	errExactLimit    = "ERR limit above 100000 is not supported with EXACT"
	errInvalidCursor = "ERR invalid cursor"
	errDBIndex       = "ERR DB index is out of range"
	errClockRange    = "ERR clock value is out of range"
	errDebugClock    = "ERR DEBUG CLOCK takes SET <unix_ns> | ADVANCE <ns> | REAL | GET"
	errShardFull     = "ERR shard full: more than 4 GiB of keys in one shard (raise the shards setting)"

	errNoAuth          = "NOAUTH Authentication required."
	errHelloNoAuth     = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	errWrongPass       = "WRONGPASS invalid username-password pair or user is disabled."
	errAuthNoPassword  = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errNoProto         = "NOPROTO unsupported protocol version"
	errClientName      = "ERR Client names cannot contain spaces, newlines or special characters."
	errNoSuchClient    = "ERR No such client"
	errProtoVersion    = "ERR Protocol version is not an integer or out of range"
	errInvalidClientID = "ERR Invalid client ID"
	errClientIDZero    = "ERR client-id should be greater than 0"

	errMultiNested = "ERR MULTI calls can not be nested"
	errExecNoMulti = "ERR EXEC without MULTI"
	errDiscardNo   = "ERR DISCARD without MULTI"
	errExecAbort   = "EXECABORT Transaction discarded because of previous errors."
	errMultiTooBig = "ERR MULTI queue over client-query-buffer-limit; the transaction will be discarded"
)

func errArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

func errHelloOption(opt []byte) string {
	return "ERR Syntax error in HELLO option '" + clip(opt, 128) + "'"
}

// errClientAttr is CLIENT SETINFO's for a value with spaces or newlines,
// naming the attribute (lib-name, lib-ver) in lower case.
func errClientAttr(attr []byte) string {
	return "ERR " + strings.ToLower(string(attr)) + " cannot contain spaces, newlines or special characters."
}

func errUnrecognizedOption(opt []byte) string {
	return "ERR Unrecognized option '" + clip(opt, 128) + "'"
}

func errUnknownClientType(typ []byte) string {
	return "ERR Unknown client type '" + clip(typ, 128) + "'"
}

func errConfigSetOption(arg []byte) string {
	return "ERR Unknown option or number of arguments for CONFIG SET - '" + clip(arg, 128) + "'"
}

func errConfigSetFailed(name string, err error) string {
	return "ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + err.Error()
}

// errInternal answers a command whose handler panicked.
func errInternal(cmd string) string { return "ERR internal error in '" + cmd + "'" }

func errPositive(arg string) string { return "ERR " + arg + " must be a positive integer" }

func errRange(arg string) string { return "ERR " + arg + " is out of range" }

func errUnknownSubcommand(sub []byte, cmd string) string {
	return "ERR unknown subcommand '" + clip(sub, 128) + "'. Try " + cmd + " HELP."
}

// errUnknownCommand words an unknown command as Redis 7 does: it quotes
// arguments while the quoted text so far (quotes and spaces included) is
// under 128 bytes, cutting each to what is left of those 128.
func errUnknownCommand(args [][]byte) string {
	var quoted []byte
	for _, a := range args[1:] {
		if len(quoted) >= 128 {
			break
		}
		quoted = append(quoted, '\'')
		quoted = append(quoted, clip(a, 128-len(quoted)+1)...)
		quoted = append(quoted, '\'', ' ')
	}
	return "ERR unknown command '" + clip(args[0], 128) + "', with args beginning with: " + string(quoted)
}

func clip(b []byte, n int) string {
	if n < 0 {
		n = 0
	}
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// Cluster mode's replies.
const (
	errCrossSlot         = "CROSSSLOT Keys in request don't hash to the same slot"
	errTryAgain          = "TRYAGAIN Hash slot is being handed over to another node, try again"
	errClusterDown       = "CLUSTERDOWN Hash slot not served"
	errClusterDisabled   = "ERR This instance has cluster support disabled"
	errInvalidSlot       = "ERR Invalid slot"
	errInvalidSlotOrKeys = "ERR Invalid slot or number of keys"
)

func errMoved(slot int, addr string) string { return "MOVED " + strconv.Itoa(slot) + " " + addr }

func errInvalidPort(b []byte) string { return "ERR Invalid base port specified: " + clip(b, 128) }

func errMeet(host string, port int, err error) string {
	return "ERR Invalid node address specified: " + host + ":" + strconv.Itoa(port) + " (" + err.Error() + ")"
}

func errImport(err error) string { return "ERR cluster import refused: " + err.Error() }
