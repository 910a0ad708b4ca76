package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsableFromAnotherModule does what the README's "Installing" section
// tells a user to do until the module path is published: a module of their
// own requires github.com/cellserver/cellserver at v0.0.0, replaces it with
// a clone's directory, and builds a program that uses this package. It runs
// offline (GOPROXY=off, GOFLAGS=-mod=mod): every module it needs is the
// repository's own, already in the module cache from building it.
func TestUsableFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module (-short)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		// The two go mod edit flags the README gives, written out.
		"go.mod": "module example.com/app\n\ngo 1.26\n\n" +
			"require github.com/cellserver/cellserver v0.0.0\n\n" +
			"replace github.com/cellserver/cellserver => " + root + "\n",
		// The repository's go.sum holds every sum the client's imports need.
		"go.sum": string(sum),
		"main.go": `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	c, err := client.New(rdb, client.Options{})
	if err != nil {
		panic(err)
	}
	r, err := c.Allow(context.Background(), "user:42", client.NewTokenBucket(10, 10, time.Second), 1)
	fmt.Println(r.Limited, err)
}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "app"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build in a module that replaces github.com/cellserver/cellserver: %v\n%s", err, out)
	}
	run := exec.Command(filepath.Join(dir, "app"))
	out, err = run.CombinedOutput()
	if err != nil {
		t.Fatalf("the built program: %v\n%s", err, out)
	}
	// No server listens at 127.0.0.1:1: the local fallback answers.
	if got := strings.TrimSpace(string(out)); got != "false <nil>" {
		t.Fatalf("the built program printed %q, want the local fallback's \"false <nil>\"", got)
	}
}
