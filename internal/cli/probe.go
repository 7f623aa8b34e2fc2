package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/pysandboxes/pysandboxes"
)

const probeUsage = `Usage: pysandboxes probe

Lists every OS provider, whether it works on this host (and why not), and what it
enforces here.
`

func probe(ctx context.Context, args []string, env *Env) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(env.Stdout, probeUsage)
			return ExitOK
		}
		fmt.Fprintf(env.Stderr, "pysandboxes probe: unexpected argument %q\n\n%s", args[0], probeUsage)
		return ExitUsage
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSTATUS\tENFORCES\tDOES NOT ENFORCE")
	var notes []string
	for _, p := range pysandboxes.Providers() {
		status := "available"
		if err := p.Probe(ctx); err != nil {
			status = "unavailable"
			notes = append(notes, fmt.Sprintf("%s: %v", p.Name(), err))
		}
		caps := p.Capabilities()
		if p.Name() == "none" {
			status += " (debugging only: no sandbox)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name(), status, capList(caps), capList(pysandboxes.AllCapabilities&^caps))
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(env.Stdout)
		for _, n := range notes {
			fmt.Fprintln(env.Stdout, n)
		}
	}
	for _, p := range pysandboxes.Providers() {
		d, ok := p.(interface{ Details() []string })
		if !ok || p.Probe(ctx) != nil {
			continue
		}
		fmt.Fprintf(env.Stdout, "\n%s:\n", p.Name())
		for _, l := range d.Details() {
			fmt.Fprintln(env.Stdout, "  "+l)
		}
	}
	fmt.Fprintln(env.Stdout, "\nCapabilities:")
	tw = tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	for _, c := range pysandboxes.AllCapabilities.List() {
		fmt.Fprintf(tw, "  %s\t%s\n", c, c.Describe())
	}
	tw.Flush()
	return ExitOK
}

func capList(c pysandboxes.Capability) string {
	if c == 0 {
		return "-"
	}
	return strings.ReplaceAll(c.String(), ",", " ")
}
