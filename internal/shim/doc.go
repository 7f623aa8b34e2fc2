// Package shim recognises the shims of version managers (pyenv and the rest of
// the rbenv family, asdf, mise and rtx, volta) and finds, without running them,
// the executable a shim would run.
//
// A shim is a small program that a version manager puts first on PATH in place
// of python3, pip or node: when it runs, the manager reads its configuration
// (environment variables, version files from the working directory up, its own
// settings) and executes the real program of the selected version. Inside a
// sandbox that does not expose the manager's tree, the shim fails ("libexec/pyenv:
// No such file or directory"); and running it on the host to ask which program it
// would start runs the manager's code, and its hooks, outside any sandbox.
//
// [Resolve] reads the shim (a bounded read of a small regular file, or the target
// of a symbolic link) and repeats the manager's own selection in Go:
//
//   - pyenv 2: PYENV_VERSION, else the first .python-version from PYENV_DIR then
//     the working directory up to /, else $PYENV_ROOT/version; "system",
//     "python-" prefixes, version prefixes resolved to the latest installed
//     version as pyenv latest does; the versions tried in order, then the system
//     PATH without the shims (a shim found there is followed as pyenv follows it).
//   - asdf 0.16 or later (the Go asdf): ASDF_<PLUGIN>_VERSION, else the first
//     .tool-versions from the working directory up that names the plugin; the
//     versions the shim lists, in its order, the first whose bin holds the
//     program; "system" from PATH without the shims.
//
// It refuses, with an [*Error] naming the shim, the reason and the command that
// prints the real path, whenever the answer would depend on code it does not
// run or on an order it cannot know: a shim whose lines it does not know, a
// pyenv hook that may change the selection, an asdf plugin's exec-path,
// list-bin-paths or legacy version file scripts, several asdf plugins for one
// program, the bash asdf, a manager whose selection it does not repeat (mise,
// rtx, volta, rbenv and the other *env managers). A file that is not a shim
// yields [ErrNotShim].
package shim
