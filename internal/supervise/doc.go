// Package supervise starts a program under a small supervisor process that owns the
// program's whole process tree.
//
// The supervisor is the host binary itself, re-executed through /proc/self/exe with a
// marker in argv[0] (or a dedicated helper binary that imports this package). Its
// init function recognises the marker, takes over before the host's main runs, and
// never returns. It:
//
//   - becomes a child subreaper, so every orphaned descendant of the program is
//     re-parented to it and reaped (no zombie stays);
//   - watches the host: its parent-death signal fires when the host dies, and it
//     then kills the whole tree;
//   - applies the restrictions of the launch (resource limits, and the stages that
//     confine the program) to the one OS thread that starts the program, so the
//     program inherits them while the supervisor itself keeps its freedom to wait
//     for and kill the tree;
//   - starts the program in a process group of its own, forwards the host's
//     ordinary signals to it, and when the program ends (or the host asks it to
//     stop) kills every remaining descendant, waits until none is left, and reports
//     the program's exact wait status to the host over a pipe.
//
// The host side is Command, which returns an *exec.Cmd for the supervisor and a
// Handle that reads its reports.
package supervise
