package pysb

// usage is python-sb's help, laid out as upstream's (argparse) help.
const usage = `usage: python-sb [-h] [--help-env] [--help-xoptions] [--help-all] [-V] [-b] [-B]
                 [--check-hash-based-pycs MODE] [-d] [-E] [-i] [-I] [-O] [-OO]
                 [-P] [-q] [-R] [-s] [-S] [-u] [-v] [-W arg] [-x] [-X opt]
                 [--pysandboxes-config FILE] [--pysandboxes-version]
                 [--learn[=FILE]]
                 [--<sb-option>=<value> ...]
                 [-m mod | -c cmd | file | -] [arg ...]

Run a Python program in a SANDBOX.

options:
  -h, -?, --help
          Print this help message and exit.
  --help-env
          Print a short description of Python-specific environment variables and
          exit.
  --help-xoptions
          Print a description of implementation-specific -X options and exit.
  --help-all
          Print complete usage information and exit.
  -V, --version
          Print the Python version number and exit (-VV: more information about
          the build).
  -b      Issue a warning when converting bytes or bytearray to str without
          specifying encoding or comparing bytes or bytearray with str or bytes
          with int. Issue an error when the option is given twice (-bb).
  -B      If given, Python won't try to write .pyc files on the import of source
          modules. See also PYTHONDONTWRITEBYTECODE.
  --check-hash-based-pycs MODE
          Control the validation behavior of hash-based .pyc files (MODE is
          default, always or never).
  -d      Turn on parser debugging output (for experts only).
  -E      Ignore all PYTHON* environment variables, e.g. PYTHONPATH and
          PYTHONHOME, that might be set.
  -i      Enter interactive mode after execution.
  -I      Run Python in isolated mode (implies -E, -P and -s).
  -O      Remove assert statements and any code conditional on the value of
          __debug__.
  -OO     Do -O and also discard docstrings.
  -P      Don't prepend a potentially unsafe path to sys.path.
  -q      Don't display the copyright and version messages even in interactive
          mode.
  -R      Turn on hash randomization.
  -s      Don't add the user site-packages directory to sys.path.
  -S      Disable the import of the module site and the site-dependent
          manipulations of sys.path that it entails.
  -u      Force the stdout and stderr streams to be unbuffered.
  -v      Print a message each time a module is initialized, showing the place
          (filename or built-in module) from which it is loaded.
  -W arg  Warning control. Python's warning machinery by default prints warning
          messages to sys.stderr.
  -x      Skip first line of source, allowing use of non-Unix forms of #!.
  -X opt  Reserved for various implementation-specific options.
  --pysandboxes-config FILE
          Where to find the pysandboxes configuration.
  --pysandboxes-version
          Print the version of pysandboxes and the commit it was built from, and
          exit.
  --learn[=FILE]
          Learn the rules the program needs and write them into FILE (default:
          the --pysandboxes-config file, else ./.py-sandboxes).
  --<sb-option>=<value>
          Add some Py-sandboxes parameters. They have priority.
  -m mod  Run library module as a script (terminates option list).
  -c cmd  Program passed in as a string (terminates option list).

Arguments:
file   : program read from script file
-      : program read from stdin (default; interactive mode if a tty)
arg ...: arguments passed to program in sys.argv[1:]
`

// Usage is python-sb's help text (for -h, -?, --help), ending with a newline.
func Usage() string { return usage }
