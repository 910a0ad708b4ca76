package main

import (
	"os"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/cellserver/cellserver/daemon"
)

// supervise tells the supervisor that mode (the supervised setting) names
// when d serves and when it stops: for systemd (or auto, when systemd
// started the process, which NOTIFY_SOCKET says), sd_notify's READY=1
// once d is ready (listening, keys restored, cluster joined) and
// STOPPING=1 when it begins to stop, each with a STATUS= line. wait
// returns once the messages due have been sent: run calls it after the
// daemon stops, so that STOPPING=1 goes out before the process exits.
//
// The messages go through go-systemd's SdNotify, which writes one
// datagram to NOTIFY_SOCKET and builds everywhere (where there is no such
// socket it reports an error, logged).
func supervise(mode string, d *daemon.Daemon, logf func(level, format string, args ...any)) (wait func()) {
	noop := func() {}
	socket := os.Getenv("NOTIFY_SOCKET")
	switch mode {
	case "upstart":
		logf("warning", "supervised upstart: cellserver does not signal upstart; use supervised systemd, or no")
		return noop
	case "systemd":
		if socket == "" {
			logf("warning", "supervised systemd: NOTIFY_SOCKET is not set, so no supervisor is told when cellserver is ready (systemd sets it for a Type=notify unit)")
			return noop
		}
	case "auto":
		if socket == "" {
			return noop
		}
	default:
		return noop
	}
	logf("notice", "Supervised by systemd: READY=1 once serving, STOPPING=1 at shutdown, over NOTIFY_SOCKET")
	notify := func(state string) {
		if _, err := sd.SdNotify(false, state); err != nil {
			logf("warning", "supervised systemd: notifying %q: %v", state, err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-d.Ready():
			select {
			case <-d.Stopping(): // stopping already: READY=1 would be news out of date
			default:
				notify(sd.SdNotifyReady + "\nSTATUS=Ready to accept connections")
			}
		case <-d.Stopping():
		}
		<-d.Stopping()
		notify(sd.SdNotifyStopping + "\nSTATUS=Shutting down")
	}()
	return func() { <-done }
}
