package launch

import "syscall"

// SignalStatus turns the exit status 128+N by which a sandboxing tool (bwrap,
// firejail) reports a program killed by signal N back into that death (a
// program that exits with such a status itself is reported as killed too).
func SignalStatus(ws syscall.WaitStatus) syscall.WaitStatus {
	if ws.Exited() {
		if c := ws.ExitStatus(); c > 128 && c < 128+32 {
			return syscall.WaitStatus(c - 128)
		}
	}
	return ws
}
