package launch

import (
	"syscall"
	"testing"
)

// TestSignalStatus: exit statuses 129..159 become deaths by signals 1..31;
// other exits and real deaths stay as they are.
func TestSignalStatus(t *testing.T) {
	exit := func(c int) syscall.WaitStatus { return syscall.WaitStatus(c << 8) }
	if ws := SignalStatus(exit(128 + 9)); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("exit 137: %#x, want killed by SIGKILL", int(ws))
	}
	if ws := SignalStatus(exit(128 + 31)); !ws.Signaled() || ws.Signal() != syscall.Signal(31) {
		t.Errorf("exit 159: %#x, want killed by signal 31", int(ws))
	}
	for _, ws := range []syscall.WaitStatus{exit(0), exit(1), exit(128), exit(160), exit(255), syscall.WaitStatus(syscall.SIGTERM)} {
		if got := SignalStatus(ws); got != ws {
			t.Errorf("%#x became %#x", int(ws), int(got))
		}
	}
}
