package wrapper

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// Lookup returns binary, or when it is "" the program name as tools finds it
// (package systool: the system's directories first, then PATH, never a copy
// another user could replace); a tool not found is an error whose message is
// install (which says how to install it), wrapping systool.ErrNotFound.
func Lookup(tools systool.Finder, binary, name, install string) (string, error) {
	if binary != "" {
		return binary, nil
	}
	return tools.Find(name, install)
}

// Help is what a tool says of its options.
type Help struct {
	// Option matches an option in the tool's --help; its first submatch is
	// the option's name.
	Option *regexp.Regexp
	// Required are the options the provider relies on.
	Required []string
	// Product and Hint name the tool in the error for a missing option:
	// "<binary> (<Product> <version>) lacks --<option><Hint>".
	Product, Hint string
}

// Options runs "binary --help" and returns the options it lists, with an
// error naming the first required option it lacks.
func (hp Help) Options(ctx context.Context, binary, version string) (map[string]bool, error) {
	known := nsutil.HelpOptions(ctx, binary, hp.Option)
	for _, need := range hp.Required {
		if !known[need] {
			return known, fmt.Errorf("%s (%s %s) lacks --%s%s", binary, hp.Product, version, need, hp.Hint)
		}
	}
	return known, nil
}

// Identity reports why a program run by a root host could not run for the
// unprivileged uid of package internal/hostid (the view the supervisor makes
// is missing, or this root is not the host's): nil when it can.
func Identity() error {
	if err := supervise.ViewAvailable(); err != nil {
		return fmt.Errorf("run as root, the program would be the host's root: %w", err)
	}
	if !hostid.Root() {
		return errors.New("run as root outside the initial user namespace, the program would be this root")
	}
	return nil
}

// Hide reports why the ignore= filter (package hideview) cannot serve the
// exposed directories here: nil when it can. The filter is mounted by the
// host's root, for a tool run for the unprivileged uid (idmap); otherwise the
// error is unmapped.
func Hide(idmap bool, unmapped string) error {
	if err := hideview.Available(); err != nil {
		return err
	}
	if !idmap {
		return errors.New(unmapped)
	}
	return nil
}

// HideDetails is the line of a provider's Details about ignore=: the filter,
// and, without it, what the provider does instead (unserved).
func HideDetails(unserved string) string {
	return "ignore=: the exposed directories the rules reach are served by a filter (FUSE, package hideview) that hides the ignored names at every lookup, " +
		"for the life of the sandbox (files made or renamed there later included), and scans nothing; without it (unprivileged) " + unserved
}
