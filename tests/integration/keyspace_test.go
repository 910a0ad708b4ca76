package integration

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// fwKey makes key a fixed-window key that lives a minute (t0 starts one).
func fwKey(t *testing.T, rdb doer, key string) {
	t.Helper()
	wantInts(t, rdb, ints(0, 10, 9, -1, 60), "FW.INCR", key, 10, 60)
}

// sortedStrings returns a go-redis array reply as sorted strings.
func sortedStrings(t *testing.T, v any) []string {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("got %#v, want an array", v)
	}
	out := make([]string, len(arr))
	for i, a := range arr {
		if out[i], ok = a.(string); !ok {
			t.Fatalf("element %d of %#v is not a string", i, v)
		}
	}
	slices.Sort(out)
	return out
}

// TestKeys: KEYS with Redis glob patterns.
func TestKeys(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	all := []string{"user:1", "user:2", "user:10", "user:a", "admin:1", "h[a]llo", "hallo", "hello", "hxllo", "héllo", "a*b", "a\\b", "key with space", ""}
	for _, k := range all {
		fwKey(t, rdb, k)
	}
	cases := []struct {
		pattern string
		want    []string
	}{
		{"*", all},
		{"user:*", []string{"user:1", "user:2", "user:10", "user:a"}},
		{"user:?", []string{"user:1", "user:2", "user:a"}},
		{"user:??", []string{"user:10"}},
		{"user:[12]", []string{"user:1", "user:2"}},
		{"user:[0-9]", []string{"user:1", "user:2"}},
		{"user:[^0-9]", []string{"user:a"}},
		{"user:[!a]", []string{"user:1", "user:2"}},
		{"*:1", []string{"user:1", "admin:1"}},
		{"*:1*", []string{"user:1", "user:10", "admin:1"}},
		{"h?llo", []string{"hallo", "hello", "hxllo"}},
		{"h[ae]llo", []string{"hallo", "hello"}},
		{"h\\[a\\]llo", []string{"h[a]llo"}},
		{"h*llo", []string{"h[a]llo", "hallo", "hello", "hxllo", "héllo"}},
		{"a\\*b", []string{"a*b"}},
		{"a\\\\b", []string{"a\\b"}},
		{"key with *", []string{"key with space"}},
		{"nomatch*", []string{}},
		{"USER:*", []string{}},
	}
	for _, c := range cases {
		got := sortedStrings(t, do(t, rdb, "KEYS", c.pattern))
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("KEYS %q = %q, want %q", c.pattern, got, want)
		}
	}
	wantVal(t, rdb, int64(len(all)), "DBSIZE")
}

// TestScan iterates a static keyspace of 1000 keys of three kinds to
// cursor 0 with MATCH, COUNT and TYPE: every key exactly once.
func TestScan(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)

	kinds := map[string][]string{}
	pipe := rdb.Pipeline()
	for i := range 1000 {
		key := fmt.Sprintf("k:%d", i)
		switch i % 4 {
		case 0, 1:
			pipe.Do(ctx, "FW.INCR", key, 10, 3600)
			kinds["fixedwindow"] = append(kinds["fixedwindow"], key)
		case 2:
			pipe.Do(ctx, "TB.TAKE", key, 10, 1, 3600)
			kinds["tokenbucket"] = append(kinds["tokenbucket"], key)
		case 3:
			pipe.Do(ctx, "CL.THROTTLE", key, 10, 1, 3600)
			kinds["string"] = append(kinds["string"], key)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	wantVal(t, rdb, int64(1000), "DBSIZE")

	scanAll := func(t *testing.T, extra ...any) map[string]int {
		t.Helper()
		seen := map[string]int{}
		cursor := "0"
		for calls := 0; ; calls++ {
			if calls > 10000 {
				t.Fatalf("SCAN did not come back to cursor 0")
			}
			reply, ok := do(t, rdb, append([]any{"SCAN", cursor}, extra...)...).([]any)
			if !ok || len(reply) != 2 {
				t.Fatalf("SCAN reply %#v", reply)
			}
			cursor = reply[0].(string)
			for _, k := range sortedStrings(t, reply[1]) {
				seen[k]++
			}
			if cursor == "0" {
				return seen
			}
		}
	}
	check := func(t *testing.T, seen map[string]int, want []string) {
		t.Helper()
		for k, n := range seen {
			if n != 1 {
				t.Errorf("key %q returned %d times", k, n)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("got %d distinct keys, want %d", len(seen), len(want))
		}
		for _, k := range want {
			if seen[k] != 1 {
				t.Errorf("key %q returned %d times, want once", k, seen[k])
			}
		}
	}
	var allKeys []string
	for _, ks := range kinds {
		allKeys = append(allKeys, ks...)
	}
	t.Run("default count", func(t *testing.T) { check(t, scanAll(t), allKeys) })
	t.Run("COUNT 1", func(t *testing.T) { check(t, scanAll(t, "COUNT", 1), allKeys) })
	t.Run("COUNT 37", func(t *testing.T) { check(t, scanAll(t, "count", 37), allKeys) })
	t.Run("COUNT 100000", func(t *testing.T) { check(t, scanAll(t, "COUNT", 100000), allKeys) })
	t.Run("MATCH", func(t *testing.T) {
		var want []string
		for _, k := range allKeys {
			if n, _ := strconv.Atoi(k[2:]); k[2] == '1' && n >= 100 && n < 200 {
				want = append(want, k)
			}
		}
		check(t, scanAll(t, "MATCH", "k:1??", "COUNT", 20), want)
		check(t, scanAll(t, "MATCH", "nomatch*"), nil)
	})
	for typ, ks := range kinds {
		t.Run("TYPE "+typ, func(t *testing.T) {
			check(t, scanAll(t, "TYPE", typ, "COUNT", 50), ks)
		})
	}
	t.Run("TYPE with MATCH", func(t *testing.T) {
		check(t, scanAll(t, "MATCH", "k:99?", "TYPE", "string"), []string{"k:991", "k:995", "k:999"})
	})
	t.Run("TYPE unknown", func(t *testing.T) { check(t, scanAll(t, "TYPE", "hash"), nil) })
	t.Run("errors", func(t *testing.T) {
		wantErr(t, rdb, "ERR invalid cursor", "SCAN", "abc")
		wantErr(t, rdb, "ERR invalid cursor", "SCAN", "-1")
		wantErr(t, rdb, "ERR syntax error", "SCAN", 0, "COUNT", 0)
		wantErr(t, rdb, "ERR value is not an integer or out of range", "SCAN", 0, "COUNT", "x")
		wantErr(t, rdb, "ERR syntax error", "SCAN", 0, "MATCH")
		wantErr(t, rdb, "ERR syntax error", "SCAN", 0, "FOO", "bar")
	})
	// go-redis's own iterator agrees.
	t.Run("go-redis ScanIterator", func(t *testing.T) {
		seen := map[string]int{}
		it := rdb.Scan(ctx, 0, "k:*", 100).Iterator()
		for it.Next(ctx) {
			seen[it.Val()]++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		check(t, seen, allKeys)
	})
}

// TestScanOneShard: with every key in one shard, SCAN COUNT 10 returns
// about 10 keys a call over the wire too, and the scan ends with every key
// once (docs/commands.md#scan).
func TestScanOneShard(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.Shards = 1 })
	rdb := ts.client(t)
	pipe := rdb.Pipeline()
	for i := range 2000 {
		pipe.Do(ctx, "FW.INCR", fmt.Sprintf("k:%d", i), 10, 3600)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	seen := map[string]int{}
	cursor := "0"
	for calls := 0; ; calls++ {
		if calls > 10000 {
			t.Fatal("SCAN did not come back to cursor 0")
		}
		reply := do(t, rdb, "SCAN", cursor, "COUNT", 10).([]any)
		keys := sortedStrings(t, reply[1])
		if len(keys) > 20 {
			t.Fatalf("SCAN %s COUNT 10 returned %d keys", cursor, len(keys))
		}
		for _, k := range keys {
			seen[k]++
		}
		if cursor = reply[0].(string); cursor == "0" {
			break
		}
	}
	if len(seen) != 2000 {
		t.Fatalf("the scan returned %d distinct keys, want 2000", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s returned %d times", k, n)
		}
	}
}

// TestExistsDelFlush: EXISTS counts duplicates, DEL/UNLINK count what
// they removed, FLUSHDB/FLUSHALL empty the keyspace.
func TestExistsDelFlush(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	for _, k := range []string{"a", "b", "c", "d"} {
		fwKey(t, rdb, k)
	}
	wantVal(t, rdb, int64(3), "EXISTS", "a", "a", "a")
	wantVal(t, rdb, int64(3), "EXISTS", "a", "b", "nope", "c")
	wantVal(t, rdb, int64(0), "EXISTS", "nope")
	wantVal(t, rdb, int64(4), "DBSIZE")
	wantVal(t, rdb, int64(1), "DEL", "a", "a", "nope")
	wantVal(t, rdb, int64(0), "DEL", "a")
	wantVal(t, rdb, int64(2), "UNLINK", "b", "c", "nope")
	wantVal(t, rdb, int64(1), "DBSIZE")
	wantErr(t, rdb, "ERR wrong number of arguments for 'del' command", "DEL")
	wantErr(t, rdb, "ERR wrong number of arguments for 'exists' command", "EXISTS")
	wantErr(t, rdb, "ERR wrong number of arguments for 'unlink' command", "UNLINK")

	for _, flush := range [][]any{
		{"FLUSHDB"}, {"FLUSHALL"}, {"FLUSHDB", "ASYNC"}, {"FLUSHDB", "sync"},
		{"FLUSHALL", "async"}, {"FLUSHALL", "SYNC"},
	} {
		for _, k := range []string{"x", "y", "z"} {
			fwKey(t, rdb, k)
		}
		wantVal(t, rdb, int64(4), "DBSIZE")
		wantOK(t, rdb, flush...)
		wantVal(t, rdb, int64(0), "DBSIZE")
		wantVal(t, rdb, []any{}, "KEYS", "*")
		// Flushed keys start fresh.
		fwKey(t, rdb, "d")
	}
	wantErr(t, rdb, "ERR syntax error", "FLUSHDB", "NOW")
	wantErr(t, rdb, "ERR syntax error", "FLUSHALL", "x")
	wantErr(t, rdb, "ERR wrong number of arguments for 'flushall' command", "FLUSHALL", "ASYNC", "SYNC")
	wantVal(t, rdb, int64(1), "DBSIZE")

	// go-redis's typed helpers read the same replies.
	if n, err := rdb.Exists(ctx, "d", "d").Result(); err != nil || n != 2 {
		t.Fatalf("Exists = %d, %v", n, err)
	}
	if s, err := rdb.FlushAll(ctx).Result(); err != nil || s != "OK" {
		t.Fatalf("FlushAll = %q, %v", s, err)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSize = %d, %v", n, err)
	}
	if _, err := rdb.Get(ctx, "d").Result(); err != redis.Nil {
		t.Fatalf("Get on a flushed key = %v, want redis.Nil", err)
	}
}
