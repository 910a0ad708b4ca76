package integration

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
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
	rc := ts.Dial(t)
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))

	rc.Send("PING\r\nCL.THROTTLE k 1 1 1\r\nCL.THROTTLE k 1 1 1\r\nCL.THROTTLE k 1 1 1\r\nECHO hi\r\n")
	for _, want := range []string{
		"+PONG\r\n",
		testkit.Ints(0, 2, 1, -1, 1),
		testkit.Ints(0, 2, 0, -1, 2),
		testkit.Ints(1, 2, 0, 1, 2),
		"$2\r\nhi\r\n",
	} {
		if got := rc.Reply(); got != want {
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
			req.WriteString(testkit.Encode("ECHO", strconv.Itoa(i)))
			want.WriteString(testkit.Bulk(strconv.Itoa(i)))
		case 2:
			req.WriteString("FW.INCR fw 1000 60\r\n")
			want.WriteString(testkit.Ints(0, 1000, int64(1000-(i/4+1)), -1, 60))
		case 3:
			req.WriteString(testkit.Encode("EXISTS", "fw", "k"))
			want.WriteString(":2\r\n")
		}
	}
	rc.Send(req.String())
	var got strings.Builder
	for range 500 {
		got.WriteString(rc.Reply())
	}
	if got.String() != want.String() {
		t.Fatalf("pipelined replies differ:\n got %q…\nwant %q…", got.String()[:200], want.String()[:200])
	}

	// QUIT in a pipeline: what follows it is not run.
	q := ts.Dial(t)
	q.Send("PING\r\nQUIT\r\nFW.INCR quit 1 60\r\nPING\r\n")
	if got := q.Reply() + q.Reply(); got != "+PONG\r\n+OK\r\n" {
		t.Fatalf("PING QUIT: got %q", got)
	}
	q.WantClosed()
	rc.WantDo(":0\r\n", "EXISTS", "quit")
}

// TestInline: telnet-style commands, with quotes, LF-only line ends and
// blank lines, as redis-server parses them.
func TestInline(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rc := ts.Dial(t)
	cases := []struct {
		line, want string
	}{
		{"PING\r\n", "+PONG\r\n"},
		{"ping\n", "+PONG\r\n"},
		{"\r\n\r\nPING\r\n", "+PONG\r\n"},
		{"ECHO hello\r\n", testkit.Bulk("hello")},
		{"ECHO \"hello world\"\r\n", testkit.Bulk("hello world")},
		{"ECHO 'single quoted'\r\n", testkit.Bulk("single quoted")},
		{"ECHO \"a\\nb\"\r\n", testkit.Bulk("a\nb")},
		{"  ECHO   spaced  \r\n", testkit.Bulk("spaced")},
		{"DEBUG CLOCK SET " + strconv.FormatInt(t0, 10) + "\r\n", "+OK\r\n"},
		{"cl.throttle user:1 15 30 60\r\n", testkit.Ints(0, 16, 15, -1, 2)},
		{"TB.TAKE tb 5 1 10 ms\n", testkit.Ints(0, 5, 4, -1, 10)},
		{"GET user:1\r\n", testkit.Bulk(strconv.FormatInt(t0+2*sec, 10))},
		{"CL.THROTTLE user:1 15\r\n", testkit.Err(cellUsage)},
		{"NOSUCH a b\r\n", testkit.Err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")},
	}
	for _, c := range cases {
		rc.Send(c.line)
		if got := rc.Reply(); got != c.want {
			t.Fatalf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
	// Unbalanced quotes are a protocol error that closes the connection.
	rc.Send("ECHO \"oops\r\n")
	if got := rc.Reply(); got != testkit.Err("ERR Protocol error: unbalanced quotes in request") {
		t.Fatalf("unbalanced quotes: got %q", got)
	}
	rc.WantClosed()
	ts.Dial(t).WantDo("+PONG\r\n", "PING")
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
		rc := ts.Dial(t)
		rc.WantDo("+OK\r\n", "MULTI")
		rc.WantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		rc.WantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		rc.WantDo("+QUEUED\r\n", "FW.INCR", "m", "2", "60")
		// A run-time error is queued and answered inside EXEC's array.
		rc.WantDo("+QUEUED\r\n", "CL.THROTTLE", "m", "1", "1", "1")
		rc.WantDo("+QUEUED\r\n", "ECHO", "done")
		rc.WantDo("*5\r\n"+testkit.Ints(0, 2, 1, -1, 60)+testkit.Ints(0, 2, 0, -1, 60)+testkit.Ints(1, 2, 0, 60, 60)+
			testkit.Err("WRONGTYPE Operation against a key holding the wrong kind of value")+testkit.Bulk("done"), "EXEC")
		rc.WantDo(testkit.Err("ERR wrong number of arguments for 'multi' command"), "MULTI", "x")
	})

	t.Run("errors", func(t *testing.T) {
		rc := ts.Dial(t)
		rc.WantDo(testkit.Err("ERR EXEC without MULTI"), "EXEC")
		rc.WantDo(testkit.Err("ERR DISCARD without MULTI"), "DISCARD")

		// Nested MULTI is an error that does not abort the transaction.
		rc.WantDo("+OK\r\n", "MULTI")
		rc.WantDo(testkit.Err("ERR MULTI calls can not be nested"), "MULTI")
		rc.WantDo("+QUEUED\r\n", "PING")
		rc.WantDo("*1\r\n+PONG\r\n", "EXEC")

		// DISCARD drops the queue.
		rc.WantDo("+OK\r\n", "MULTI")
		rc.WantDo("+QUEUED\r\n", "FW.INCR", "d", "2", "60")
		rc.WantDo("+OK\r\n", "DISCARD")
		rc.WantDo(":0\r\n", "EXISTS", "d")

		// An arity error while queuing aborts EXEC.
		rc.WantDo("+OK\r\n", "MULTI")
		rc.WantDo("+QUEUED\r\n", "FW.INCR", "a", "2", "60")
		rc.WantDo(testkit.Err(cellUsage), "CL.THROTTLE", "a", "1")
		rc.WantDo(testkit.Err("ERR wrong number of arguments for 'tb.take' command"), "TB.TAKE", "a")
		rc.WantDo("+QUEUED\r\n", "PING")
		rc.WantDo(testkit.Err("EXECABORT Transaction discarded because of previous errors."), "EXEC")
		rc.WantDo(":0\r\n", "EXISTS", "a")

		// So does an unknown command.
		rc.WantDo("+OK\r\n", "MULTI")
		rc.WantDo(testkit.Err("ERR unknown command 'NOPE', with args beginning with: "), "NOPE")
		rc.WantDo(testkit.Err("EXECABORT Transaction discarded because of previous errors."), "EXEC")
		// And the connection is out of MULTI afterwards.
		rc.WantDo(testkit.Err("ERR EXEC without MULTI"), "EXEC")
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
