package integration

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestPipelineGoRedis sends 1000 mixed commands in one go-redis pipeline
// and checks every reply, in order.
func TestPipelineGoRedis(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		pipe := rdb.Pipeline()
		var cmds []*redis.Cmd
		var wants []any
		calls := map[string]int64{}
		for i := range 1000 {
			switch i % 5 {
			case 0:
				cmds = append(cmds, pipe.Do(ctx, "PING"))
				wants = append(wants, "PONG")
			case 1:
				cmds = append(cmds, pipe.Do(ctx, "ECHO", strconv.Itoa(i)))
				wants = append(wants, strconv.Itoa(i))
			case 2:
				// max_burst 999, 1 per s: the k-th call on a key has
				// 1000 − k left and resets in k s.
				key := fmt.Sprintf("cl:%d", i%7)
				calls[key]++
				k := calls[key]
				cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", key, 999, 1, 1))
				wants = append(wants, []any{int64(0), int64(1000), 1000 - k, int64(-1), k})
			case 3:
				calls["fw"]++
				k := calls["fw"]
				cmds = append(cmds, pipe.Do(ctx, "FW.INCR", "fw", 150, 60))
				if k <= 150 {
					wants = append(wants, []any{int64(0), int64(150), 150 - k, int64(-1), int64(60)})
				} else {
					wants = append(wants, []any{int64(1), int64(150), int64(0), int64(60), int64(60)})
				}
			case 4:
				cmds = append(cmds, pipe.Do(ctx, "EXISTS", "fw", "cl:2", "nope"))
				wants = append(wants, int64(2))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		for i, c := range cmds {
			got, err := c.Result()
			if err != nil || !reflect.DeepEqual(got, wants[i]) {
				t.Fatalf("command %d %v: got %#v, %v; want %#v", i, c.Args(), got, err, wants[i])
			}
		}
		wantVal(t, rdb, int64(8), "DBSIZE")
	})
}

// TestPipelineRaw writes many commands, multibulk and inline, in one
// packet and reads every reply back in order.
func TestPipelineRaw(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rc := dialRaw(t, ts.Addr)
	rc.wantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))

	rc.send("PING\r\nCL.THROTTLE k 1 1 1\r\nCL.THROTTLE k 1 1 1\r\nCL.THROTTLE k 1 1 1\r\nECHO hi\r\n")
	for _, want := range []string{
		"+PONG\r\n",
		respInts(0, 2, 1, -1, 1),
		respInts(0, 2, 0, -1, 2),
		respInts(1, 2, 0, 1, 2),
		"$2\r\nhi\r\n",
	} {
		if got := rc.reply(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}

	// 500 requests of both framings in one write.
	var req, want strings.Builder
	for i := range 500 {
		switch i % 4 {
		case 0:
			req.WriteString("PING\r\n")
			want.WriteString("+PONG\r\n")
		case 1:
			req.WriteString(encode("ECHO", strconv.Itoa(i)))
			want.WriteString(respBulk(strconv.Itoa(i)))
		case 2:
			req.WriteString("FW.INCR fw 1000 60\r\n")
			want.WriteString(respInts(0, 1000, int64(1000-(i/4+1)), -1, 60))
		case 3:
			req.WriteString(encode("EXISTS", "fw", "k"))
			want.WriteString(":2\r\n")
		}
	}
	rc.send(req.String())
	var got strings.Builder
	for range 500 {
		got.WriteString(rc.reply())
	}
	if got.String() != want.String() {
		t.Fatalf("pipelined replies differ:\n got %q…\nwant %q…", got.String()[:200], want.String()[:200])
	}

	// QUIT in a pipeline: what follows it is not run.
	q := dialRaw(t, ts.Addr)
	q.send("PING\r\nQUIT\r\nFW.INCR quit 1 60\r\nPING\r\n")
	if got := q.reply() + q.reply(); got != "+PONG\r\n+OK\r\n" {
		t.Fatalf("PING QUIT: got %q", got)
	}
	q.wantClosed()
	rc.wantDo(":0\r\n", "EXISTS", "quit")
}

// TestInline: telnet-style commands, with quotes, LF-only line ends and
// blank lines, as redis-server parses them.
func TestInline(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rc := dialRaw(t, ts.Addr)
	cases := []struct {
		line, want string
	}{
		{"PING\r\n", "+PONG\r\n"},
		{"ping\n", "+PONG\r\n"},
		{"\r\n\r\nPING\r\n", "+PONG\r\n"},
		{"ECHO hello\r\n", respBulk("hello")},
		{"ECHO \"hello world\"\r\n", respBulk("hello world")},
		{"ECHO 'single quoted'\r\n", respBulk("single quoted")},
		{"ECHO \"a\\nb\"\r\n", respBulk("a\nb")},
		{"  ECHO   spaced  \r\n", respBulk("spaced")},
		{"DEBUG CLOCK SET " + strconv.FormatInt(t0, 10) + "\r\n", "+OK\r\n"},
		{"cl.throttle user:1 15 30 60\r\n", respInts(0, 16, 15, -1, 2)},
		{"TB.TAKE tb 5 1 10 ms\n", respInts(0, 5, 4, -1, 10)},
		{"GET user:1\r\n", respBulk(strconv.FormatInt(t0+2*sec, 10))},
		{"CL.THROTTLE user:1 15\r\n", respErr(cellUsage)},
		{"NOSUCH a b\r\n", respErr("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")},
	}
	for _, c := range cases {
		rc.send(c.line)
		if got := rc.reply(); got != c.want {
			t.Fatalf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
	// Unbalanced quotes are a protocol error that closes the connection.
	rc.send("ECHO \"oops\r\n")
	if got := rc.reply(); got != respErr("ERR Protocol error: unbalanced quotes in request") {
		t.Fatalf("unbalanced quotes: got %q", got)
	}
	rc.wantClosed()
	dialRaw(t, ts.Addr).wantDo("+PONG\r\n", "PING")
}

// TestMultiExec: MULTI/EXEC through go-redis and byte for byte.
func TestMultiExec(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	setClock(t, rdb, t0)

	t.Run("TxPipelined", func(t *testing.T) {
		var cmds []*redis.Cmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			cmds = append(cmds,
				p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 1),
				p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 1),
				p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 1),
				p.Do(ctx, "GET", "tx"),
				p.Do(ctx, "PING"),
				p.Do(ctx, "DEL", "tx"),
				p.Do(ctx, "EXISTS", "tx"),
			)
			return nil
		})
		if err != nil {
			t.Fatalf("TxPipelined: %v", err)
		}
		wants := []any{
			[]any{int64(0), int64(2), int64(1), int64(-1), int64(1)},
			[]any{int64(0), int64(2), int64(0), int64(-1), int64(2)},
			[]any{int64(1), int64(2), int64(0), int64(1), int64(2)},
			strconv.FormatInt(t0+2*sec, 10),
			"PONG",
			int64(1),
			int64(0),
		}
		for i, c := range cmds {
			if got, err := c.Result(); err != nil || !reflect.DeepEqual(got, wants[i]) {
				t.Fatalf("command %d %v: got %#v, %v; want %#v", i, c.Args(), got, err, wants[i])
			}
		}
	})

	t.Run("raw", func(t *testing.T) {
		rc := dialRaw(t, ts.Addr)
		rc.wantDo("+OK\r\n", "MULTI")
		rc.wantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		rc.wantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		rc.wantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		// A run-time error is queued and answered inside EXEC's array.
		rc.wantDo("+QUEUED\r\n", "CL.THROTTLE", "m", "1", "1", "1")
		rc.wantDo("+QUEUED\r\n", "ECHO", "done")
		rc.wantDo("*5\r\n"+respInts(0, 2, 1, -1, 60)+respInts(0, 2, 0, -1, 60)+respInts(1, 2, 0, 60, 60)+
			respErr("WRONGTYPE Operation against a key holding the wrong kind of value")+respBulk("done"), "EXEC")
		rc.wantDo(respErr("ERR wrong number of arguments for 'multi' command"), "MULTI", "x")
	})

	t.Run("errors", func(t *testing.T) {
		rc := dialRaw(t, ts.Addr)
		rc.wantDo(respErr("ERR EXEC without MULTI"), "EXEC")
		rc.wantDo(respErr("ERR DISCARD without MULTI"), "DISCARD")

		// Nested MULTI is an error that does not abort the transaction.
		rc.wantDo("+OK\r\n", "MULTI")
		rc.wantDo(respErr("ERR MULTI calls can not be nested"), "MULTI")
		rc.wantDo("+QUEUED\r\n", "PING")
		rc.wantDo("*1\r\n+PONG\r\n", "EXEC")

		// DISCARD drops the queue.
		rc.wantDo("+OK\r\n", "MULTI")
		rc.wantDo("+QUEUED\r\n", "FW.INCR", "d", "2", "60")
		rc.wantDo("+OK\r\n", "DISCARD")
		rc.wantDo(":0\r\n", "EXISTS", "d")

		// An arity error while queuing aborts EXEC.
		rc.wantDo("+OK\r\n", "MULTI")
		rc.wantDo("+QUEUED\r\n", "FW.INCR", "a", "2", "60")
		rc.wantDo(respErr(cellUsage), "CL.THROTTLE", "a", "1")
		rc.wantDo(respErr("ERR wrong number of arguments for 'tb.take' command"), "TB.TAKE", "a")
		rc.wantDo("+QUEUED\r\n", "PING")
		rc.wantDo(respErr("EXECABORT Transaction discarded because of previous errors."), "EXEC")
		rc.wantDo(":0\r\n", "EXISTS", "a")

		// So does an unknown command.
		rc.wantDo("+OK\r\n", "MULTI")
		rc.wantDo(respErr("ERR unknown command 'NOPE', with args beginning with: "), "NOPE")
		rc.wantDo(respErr("EXECABORT Transaction discarded because of previous errors."), "EXEC")
		// And the connection is out of MULTI afterwards.
		rc.wantDo(respErr("ERR EXEC without MULTI"), "EXEC")
	})

	t.Run("go-redis EXECABORT", func(t *testing.T) {
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "FW.INCR", "g", 2, 60)
			p.Do(ctx, "FW.INCR", "g")
			return nil
		})
		if err == nil || err.Error() != "EXECABORT Transaction discarded because of previous errors." {
			t.Fatalf("got %v, want EXECABORT", err)
		}
		wantVal(t, rdb, int64(0), "EXISTS", "g")
	})
}
