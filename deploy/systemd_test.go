package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitLines returns the "Key=value" lines of a unit file, comments left
// out, in order.
func unitLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "[") {
			out = append(out, l)
		}
	}
	return out
}

// confValue returns the value of the last line "name value" of a
// cellserver config text ("" if none).
func confValue(conf, name string) string {
	v := ""
	for _, l := range strings.Split(conf, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == name {
			v = strings.Join(f[1:], " ")
		}
	}
	return v
}

// The unit is Type=notify, runs as its own user with the hardening the
// issue asks for, may write only the config's dir, and the sample config
// asks for supervised systemd. systemd-analyze, where it runs, finds
// nothing to say about the unit and rates its exposure "OK" or better.
func TestSystemdUnit(t *testing.T) {
	const unit = "systemd/cellserver.service"
	lines := unitLines(t, unit)
	has := map[string]bool{}
	for _, l := range lines {
		has[l] = true
	}
	conf, err := os.ReadFile("cellserver.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := confValue(string(conf), "dir")
	for _, want := range []string{"Type=notify", "User=cellserver", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=", "ReadWritePaths=" + dir,
		"LoadCredential=cellserver.conf:/etc/cellserver/cellserver.conf"} {
		if !has[want] {
			t.Errorf("%s lacks %s", unit, want)
		}
	}
	if dir != "/var/lib/cellserver" || !has["StateDirectory=cellserver"] {
		t.Errorf("cellserver.conf's dir %q is not the unit's StateDirectory /var/lib/cellserver", dir)
	}
	if got := confValue(string(conf), "supervised"); got != "systemd" {
		t.Errorf("cellserver.conf: supervised %q, want systemd (the unit is Type=notify)", got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit was not verified")
	}
	// verify checks that ExecStart's binary exists: point it at ours.
	tmp := t.TempDir()
	text, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(tmp, "cellserver.service")
	text = []byte(strings.ReplaceAll(string(text), "/usr/local/bin/cellserver", staticBinary(t)))
	if err := os.WriteFile(copyPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	// A trivial unit first: where systemd-analyze cannot run at all (some
	// containers), say so and skip.
	trivial := filepath.Join(tmp, "trivial.service")
	if err := os.WriteFile(trivial, []byte("[Service]\nExecStart=/bin/sh -c true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", trivial).CombinedOutput(); err != nil || len(out) > 0 {
		t.Skipf("systemd-analyze verify cannot run here (%v: %s): the unit was not verified", err, out)
	}
	// verify exits 0 on unknown keys and bad values, which it prints:
	// any output fails.
	if out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
	// The exposure score, 0 (best) to 10, times ten: 2.0 is "OK".
	out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=20", copyPath).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security %s: %v\n%s", unit, err, out)
	}
	if i := strings.Index(string(out), "Overall exposure level"); i >= 0 {
		t.Log(strings.TrimSpace(string(out[i:])))
	}
}

// The sample config loads and serves: cellserver started on it (with
// its ports, dir and metrics-addr pointed at the test's) is ready, keeps
// protected mode, and takes no password (it ships commented out).
func TestSampleConfigServes(t *testing.T) {
	s := startBinary(t, t.TempDir(), "cellserver.conf", "--supervised", "no")
	if got := s.ping(t, ""); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
}
