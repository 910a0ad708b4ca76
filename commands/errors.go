package commands

import (
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/limiter"
)

// Every reply error cellserver sends, with its prefix. Texts with a %s or
// %q verb are completed by the function next to their use.
const (
	// errPrefix and errCellPrefix begin an error of unforeseen text:
	// Redis's generic prefix, and redis-cell's (CL.THROTTLE).
	errPrefix     = "ERR "
	errCellPrefix = "Cell error: Store error: "

	// redis-cell's own texts (no ERR prefix).
	errCellParseInt   = "Cell error: Store error: Couldn't parse as integer: "
	errCellZeroRate   = "Cell error: Store error: Zero rates are not supported"
	errCellNegBurst   = "Cell error: Store error: max_burst must not be negative"
	errCellNegCount   = "Cell error: Store error: count must not be negative"
	errCellNegPeriod  = "Cell error: Store error: period must not be negative"
	errCellBurstRange = "Cell error: Store error: max_burst is out of range"
	errCellPeriodRng  = "Cell error: Store error: period is out of range"
	errCellQtyRange   = "Cell error: Store error: quantity is out of range"

	errWrongType       = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInteger      = "ERR value is not an integer or out of range"
	errSyntax          = "ERR syntax error"
	errExactLimit      = "ERR limit above 100000 is not supported with EXACT"
	errMaxWaitNegative = "ERR maxwait must not be negative"
	errInvalidCursor   = "ERR invalid cursor"
	errDBIndex         = "ERR DB index is out of range"
	errClockRange      = "ERR clock value is out of range"
	errSlowlogCount    = "ERR count should be greater than or equal to -1"
	errNoConfigFile    = "ERR The server is running without a config file"
	errDebugClock      = "ERR DEBUG CLOCK takes SET <unix_ns> | ADVANCE <ns> | REAL | GET"
	// errDebugNotAllowed is Redis 7's refusal of DEBUG to a client it may
	// not serve (enable-debug-command local, a remote client).
	errDebugNotAllowed = `ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.`
	// errKeyTooLarge refuses a command that would create a key longer
	// than max-key-size, in the words of Redis's refusal of a string over
	// proto-max-bulk-len.
	errKeyTooLarge = "ERR key exceeds maximum allowed size (max-key-size)"
	errShardFull   = "ERR shard full: more than 4 GiB of keys in one shard (raise the shards setting)"

	// ML.THROTTLE.
	errMLCount   = "ERR numlimits does not match the number of limits given"
	errMLShort   = "ERR wrong number of arguments for a limit of 'ml.throttle'"
	errMLDupKey  = "ERR the same key appears twice in one 'ml.throttle' call"
	errMLTooMany = "ERR too many limits in one 'ml.throttle' call (at most 1000)" // mlMaxLimits
	errGetKeys   = "ERR Invalid command specified"
	errGetKeysNo = "ERR The command has no key arguments"
	errGetKeysN  = "ERR Invalid number of arguments specified for command"
	errOOM       = "OOM command not allowed when used memory > 'maxmemory'."

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

	// SCRIPT's (cmd_script.go): cellserver runs no scripts.
	errNotBusy         = "NOTBUSY No scripts in execution right now."
	errScriptFlushMode = "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
	errNoScripting     = "ERR cellserver runs no scripts: SCRIPT LOAD, SCRIPT DEBUG and EVAL are not supported"

	errNoPubSub = "ERR pub/sub is not available on this connection"

	errLoading          = "LOADING Redis is loading the dataset in memory"
	errNoPersistence    = "ERR persistence is off: start cellserver with --dir <path> (and save <seconds> <changes> rules) to take snapshots"
	errSaveFailed       = "ERR snapshot failed: see the server's log (INFO persistence shows rdb_last_bgsave_status)"
	errBGSaveInProgress = "ERR Background save already in progress"
	errShutdownSave     = "ERR Errors trying to SHUTDOWN. Check logs."
	errBackupEmptyPath  = "ERR BACKUP needs a directory path: BACKUP <path> (relative paths are taken within the dir setting)"
	errBackupInProgress = "ERR a backup is already in progress: wait for it to end (the server's log says when)"
	errBackupExists     = "ERR the backup path already exists: BACKUP writes into a new directory"
	errBackupInStore    = "ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"
	errBackupOutsideDir = "ERR the backup path is outside the dir setting (symlinks resolved): enable-protected-configs allows only paths under dir"

	errMultiNested = "ERR MULTI calls can not be nested"
	errExecNoMulti = "ERR EXEC without MULTI"
	errDiscardNo   = "ERR DISCARD without MULTI"
	errExecAbort   = "EXECABORT Transaction discarded because of previous errors."
	errNotInMulti  = "ERR Command not allowed inside a transaction" // Redis 7 for a no_multi command (SHUTDOWN)
	errMultiTooBig = "ERR MULTI queue full (at most 10000 commands and 16 MiB, or client-query-buffer-limit); the transaction is discarded"
)

// errTextDuplicateParameter is ErrDuplicateSetting's text, which
// errConfigSetFailed completes: Redis 7's words for a name given twice in
// one CONFIG SET.
const errTextDuplicateParameter = "duplicate parameter"

// Errors the server answers on a new connection before any command, and
// then closes it. They are exported for package server.
const (
	// ErrMaxClients refuses a connection past maxclients.
	ErrMaxClients = "ERR max number of clients reached"
	// ErrProtectedMode refuses a connection from a non-local client while
	// protected mode is on and no password is set: Redis 7's text, word
	// for word (read from redis-server 7.0.15). Every remedy it names
	// works with cellserver too (CONFIG SET protected-mode no,
	// --protected-mode no, the config file, a password) except CONFIG
	// REWRITE, which cellserver does not have.
	ErrProtectedMode = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."
)

// ErrTextMaxClientsFit is Redis 7's reason, completed by CONFIG SET's
// error, for a maxclients the open file limit cannot hold: n is the most
// it can.
func ErrTextMaxClientsFit(n int) string {
	return "The operating system is not able to handle the specified number of clients, try with " + strconv.Itoa(n)
}

// errSyntaxHint is a limiter call's syntax error (limiter.ArgError with
// ErrSyntax): Redis's "ERR syntax error", then what is wrong with the
// word and how the kind's command is written, both from its row of
// limiter.Kinds, e.g. "ERR syntax error: options (MS) come after the
// cost; usage: TB.TAKE key capacity refill period [cost] [MS]".
func errSyntaxHint(ae *limiter.ArgError) string {
	spec := ae.Kind.Spec()
	name := strings.ToUpper(spec.Command)
	var why string
	switch ae.Reason {
	case limiter.CostAfterOption:
		why = "options (" + strings.Join(spec.OptionWords(), ", ") + ") come after the " + spec.Cost
	case limiter.OptionTwice:
		why = strings.ToUpper(ae.Arg) + " is given twice"
	case limiter.ExtraInteger:
		why = "one integer too many ('" + clip([]byte(ae.Arg), 128) + "')"
	case limiter.MissingValue:
		why = strings.ToUpper(ae.Arg) + " needs a value"
	default:
		why = "'" + clip([]byte(ae.Arg), 128) + "' is not an option of " + name
	}
	return errSyntax + ": " + why + "; usage: " + spec.Usage()
}

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

// errRewriteFailed is CONFIG REWRITE's error when the file cannot be
// written.
func errRewriteFailed(err error) string { return "ERR Rewriting config file: " + err.Error() }

// errBackupFailed is BACKUP's when the snapshot or the copy failed; what
// it wrote of the backup is removed.
func errBackupFailed(err error) string { return "ERR backup failed: " + err.Error() }

// errInternal answers a command whose handler panicked.
func errInternal(cmd string) string { return "ERR internal error in '" + cmd + "'" }

func errPositive(arg string) string { return "ERR " + arg + " must be a positive integer" }

func errRange(arg string) string { return "ERR " + arg + " is out of range" }

// errSubscribedContext refuses cmd on a RESP2 connection in subscribed
// mode, in Redis 7.0's words.
func errSubscribedContext(cmd string) string {
	return "ERR Can't execute '" + cmd + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}

// errUnknownNode answers CLUSTER REPLICAS for a node id this node does
// not know, in Redis 7.0's words (the id clipped to 128 bytes).
func errUnknownNode(id []byte) string { return "ERR Unknown node " + clip(id, 128) }

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
	errClusterIsDown     = "CLUSTERDOWN The cluster is down"
	errClusterDisabled   = "ERR This instance has cluster support disabled"
	errInvalidSlot       = "ERR Invalid slot"
	errInvalidSlotOrKeys = "ERR Invalid slot or number of keys"
	errNotLink           = "ERR CLUSTER IMPORT is taken on a cluster link only (CLUSTER LINK)"
)

func errMoved(slot int, addr string) string { return "MOVED " + strconv.Itoa(slot) + " " + addr }

func errInvalidPort(b []byte) string { return "ERR Invalid base port specified: " + clip(b, 128) }

func errMeet(host string, port int, err error) string {
	return "ERR Invalid node address specified: " + host + ":" + strconv.Itoa(port) + " (" + err.Error() + ")"
}

func errLink(err error) string { return "ERR cluster link refused: " + err.Error() }

func errImport(err error) string { return "ERR cluster import refused: " + err.Error() }

// RL.CHECK's errors (cmd_rules.go).
const (
	errRLHits            = "ERR HITS must be a non-negative integer"
	errRLDescriptors     = "ERR DESCRIPTORS must be followed by a count from 0 to 1000"
	errRLDescriptorShape = "ERR each descriptor is its number of entries (at least 1) then that many key value pairs, and only HITS n may follow the last"
)
