package pysb_test

import (
	"errors"
	"fmt"

	"github.com/pysandboxes/pysandboxes/internal/pysb"
)

// What cmd/python-sb does with its command line.
func Example() {
	for _, argv := range [][]string{
		{"-I", "--expose-ro=/data", "--learn", "-mjson.tool", "--sort-keys", "in.json"},
		{"app.py", "--expose-ro=/x"},
		{"-m"},
	} {
		inv, err := pysb.Parse(argv)
		var ue *pysb.UsageError
		switch {
		case errors.As(err, &ue):
			fmt.Println(err) // on stderr, then exit with pysb.ExitUsage
			continue
		case inv.Help:
			// print pysb.Usage() and exit 0
		case inv.Mode == pysb.Info:
			// run the real interpreter with inv.PythonArgs(), no sandbox
		}
		fmt.Printf("%v %q flags=%q args=%q rules=%q learn=%v argv0=%q\n",
			inv.Mode, inv.Target, inv.PythonFlags, inv.Args, inv.Rules, inv.Learn != nil, inv.Argv0())
	}
	// Output:
	// Module "json.tool" flags=["-I"] args=["--sort-keys" "in.json"] rules=["expose-ro=/data"] learn=true argv0="-m"
	// Script "app.py" flags=[] args=["--expose-ro=/x"] rules=[] learn=false argv0="app.py"
	// Argument expected for the -m option
	// usage: python-sb [option] ... [-c cmd | -m mod | file | -] [arg] ...
	// Try `python-sb -h' for more information.
}
