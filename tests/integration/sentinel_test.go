package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// TestSentinelHelloLink: a real Redis Sentinel (redis-server --sentinel)
// monitoring a cellserver opens its pub/sub link to the instance,
// subscribes to __sentinel__:hello, publishes its hello messages there,
// and reads the instance's run_id from INFO. (Failovers:
// failover_test.go.)
func TestSentinelHelloLink(t *testing.T) {
	// Debian's redis-sentinel (.ci/run installs it), or redis-server in
	// sentinel mode, which it is.
	bin, args := "redis-sentinel", []string{}
	if _, err := exec.LookPath(bin); err != nil {
		bin, args = testkit.LookTool(t, "redis-server"), []string{"--sentinel"}
	}
	ts := startServer(t)
	dir := t.TempDir()
	port := testkit.FreePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	text := "port " + strconv.Itoa(port) + "\nbind 127.0.0.1\ndir " + dir + "\n" +
		"sentinel monitor cell 127.0.0.1 " + strconv.Itoa(ts.Port) + " 1\n" +
		"sentinel down-after-milliseconds cell 1000\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(sctx, bin, append([]string{conf}, args...)...)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	rdb := ts.client(t)
	ps := rdb.Subscribe(ctx, "__sentinel__:hello")
	defer ps.Close()
	testkit.WaitFor(t, "Sentinel's subscription to its hello channel", func() bool {
		n, err := rdb.PubSubNumSub(ctx, "__sentinel__:hello").Result()
		return err == nil && n["__sentinel__:hello"] == 2 // Sentinel's link and ours
	})
	var hello string
	testkit.WaitFor(t, "a hello message from Sentinel", func() bool {
		m, err := ps.ReceiveTimeout(ctx, time.Second)
		if msg, ok := m.(*redis.Message); ok && err == nil {
			hello = msg.Payload
			return true
		}
		return false
	})
	// ip,port,runid,epoch,master name,master ip,master port,master epoch
	if f := strings.Split(hello, ","); len(f) != 8 || f[1] != strconv.Itoa(port) || f[4] != "cell" || f[6] != strconv.Itoa(ts.Port) {
		t.Errorf("hello message %q", hello)
	}
	list := rdb.ClientList(ctx).Val()
	if !strings.Contains(list, "-pubsub age=") || !strings.Contains(list, "flags=P") {
		t.Errorf("CLIENT LIST has no Sentinel pub/sub link: %q", list)
	}

	info := rdb.Info(ctx, "server").Val()
	i := strings.Index(info, "run_id:")
	if i < 0 || len(info) < i+47 {
		t.Fatalf("INFO server: %q", info)
	}
	runID := info[i+7 : i+47]
	sen := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer sen.Close()
	testkit.WaitFor(t, "Sentinel to read run_id", func() bool {
		m, err := sen.Master(ctx, "cell").Result()
		return err == nil && m["runid"] == runID
	})
}

// TestSentinelFailoverTransaction sends, byte for byte, the transaction a
// Sentinel sends the replica it promotes (sentinel.c's
// sentinelSendSlaveOf in Redis 7.0): MULTI, SLAVEOF NO ONE, CONFIG
// REWRITE, CLIENT KILL TYPE normal, CLIENT KILL TYPE pubsub, EXEC. Every
// command is queued; EXEC runs them all, CONFIG REWRITE failing as
// Redis's does on a server started without a config file (Sentinel
// ignores that reply), and closes every other normal and pub/sub
// connection but the Sentinel's own. redis-server 7.0.15 answers the same
// bytes. It runs the binary, which wires replication in.
func TestSentinelFailoverTransaction(t *testing.T) {
	t.Parallel()
	ts := testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), 0, "--loglevel", "warning")
	other := testkit.Dial(t, ts.Addr)
	other.WantDo("+PONG\r\n", "PING")
	sub := testkit.Dial(t, ts.Addr)
	sub.WantDo("*3\r\n"+testkit.Bulk("subscribe")+testkit.Bulk("__sentinel__:hello")+":1\r\n", "SUBSCRIBE", "__sentinel__:hello")

	sen := testkit.Dial(t, ts.Addr)
	sen.WantDo("+OK\r\n", "CLIENT", "SETNAME", "sentinel-0123abcd-cmd")
	sen.WantLines("+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"+
		"*4\r\n+OK\r\n-ERR The server is running without a config file\r\n:1\r\n:1\r\n+PONG\r\n",
		"MULTI\r\nSLAVEOF NO ONE\r\nCONFIG REWRITE\r\nCLIENT KILL TYPE normal\r\nCLIENT KILL TYPE pubsub\r\nEXEC\r\nPING\r\n")
	other.WantClosed()
	sub.WantClosed()
}
