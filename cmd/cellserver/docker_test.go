package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// TestDockerCMDPersists: the Dockerfile says "The
// snapshot store (dir /data): mount a volume here to keep keys across
// restarts", and declares VOLUME /data; but its CMD gives --dir /data with
// no save rule, and dir alone no longer turns persistence on (server.Config
// .Persistent: dir and save). The image as shipped keeps nothing across a
// restart, whatever volume is mounted.
func TestDockerCMDPersists(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CMD ") {
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "CMD ")), &cmd); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cmd) == 0 {
		t.Fatal("no CMD in the Dockerfile")
	}
	cfg, _, err := parseArgs(cmd, io.Discard)
	if err != nil {
		t.Fatalf("parseArgs(%q): %v", cmd, err)
	}
	if !cfg.Persistent() {
		t.Fatalf("the image's CMD %q: dir %q, save set %v: persistence is off, though the Dockerfile says a volume on /data keeps keys across restarts", cmd, cfg.Dir, cfg.SaveSet)
	}
}
