package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dockerfile returns the Dockerfile's instructions: continuation lines
// joined, comments left out.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || l == "" && cur == "" {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		if cur+l != "" {
			out = append(out, cur+l)
		}
		cur = ""
	}
	return out
}

// The Dockerfile builds in one stage and runs in another, statically
// (CGO_ENABLED=0), as a non-root user, exposes the client, gossip and
// metrics ports, and checks health with the binary's own probe (the run
// image has no curl). Where a Docker daemon answers, the image is built
// and its health check run; here none does, and the test says so.
func TestDockerfile(t *testing.T) {
	ins := dockerfile(t)
	var from, user int
	want := map[string]bool{"CGO_ENABLED=0": false, "EXPOSE 6379 16379 16379/udp 9187": false,
		`HEALTHCHECK`: false, `"--healthcheck", "http://127.0.0.1:9187/healthz"`: false}
	for _, in := range ins {
		switch strings.ToUpper(strings.Fields(in)[0]) {
		case "FROM":
			from++
		case "USER":
			if f := strings.Fields(in); f[1] == "root" || f[1] == "0" || strings.HasPrefix(f[1], "0:") {
				t.Errorf("runs as root: %s", in)
			}
			user++
		}
		for w := range want {
			if strings.Contains(in, w) {
				want[w] = true
			}
		}
	}
	if from < 2 || user == 0 {
		t.Errorf("%d FROM and %d USER instructions: want a build stage, a run stage and a non-root user", from, user)
	}
	for w, ok := range want {
		if !ok {
			t.Errorf("the Dockerfile lacks %s", w)
		}
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker is not installed: the image was not built")
	}
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker daemon answers (%s): the image was not built", strings.TrimSpace(string(out)))
	}
	if testing.Short() {
		t.Skip("-short: the image was not built")
	}
	tag := "cellserver-deploy-test:" + time.Now().Format("20060102150405")
	build := exec.Command(docker, "build", "-f", "deploy/docker/Dockerfile", "-t", tag, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })
	out, err := exec.Command(docker, "run", "-d", "--rm", tag).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command(docker, "rm", "-f", id).Run() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(docker, "exec", id, "/usr/local/bin/cellserver", "--healthcheck", "http://127.0.0.1:9187/readyz").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's /readyz: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
}
