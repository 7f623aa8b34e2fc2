// Package wrapper is the core of the wrapper providers: those that confine a
// program by running a sandboxing tool around it (bwrap, firejail), the tool
// itself started as the supervised program (package internal/launch).
//
// What is the same for every such tool lives here, in the order a provider uses
// it:
//
//   - (the provider's skeleton, its Core, Compile and Prepare, is package
//     internal/prepare's, shared with the other providers);
//   - the probe's steps: finding the binary (Lookup), the options its --help
//     lists (Help.Options), whether the program can run for an unprivileged
//     host uid when the host is root (Identity), whether the ignore= filter can
//     serve the exposed directories (Hide);
//   - the compile pipeline (Compiled.Compile): the tool's own parameters, the
//     network plan (PlanNetwork: what net= rules make of internal/netfilter),
//     env(1), the exposures the tool shows of its own (/proc, /dev), the
//     Landlock listen rules, the file-system view plan (package
//     internal/hostview) with the files a network needs, and the directories
//     the ignore= filter serves (package internal/hideview);
//   - the table check of the <provider>.<option>= lines (CheckParams, Flag);
//   - the launch flow: the program and env(1) (Programs), the view of one
//     program (Compiled.View), the filter and idmapped view of a root host
//     (Compiled.StartFilters, Compiled.Idmapped), and the supervised run of the
//     tool with its descriptors, the program's signals and status, and the
//     release of what the run held (Supervise).
//
// What a tool does its own way stays in its provider, explicit: how it spells
// its command line, how it takes the network (bwrap sets the filter up in the
// namespace it made, while it holds the program; firejail joins a named
// namespace set up before it starts), the order of the supervisor's stages,
// its Details and Capabilities.
package wrapper
