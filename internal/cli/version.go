package cli

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "",
		summary:  "print the version and the commit it was built from",
		about: "Prints the version of pysandboxes, the commit it was built from (with \"modified\" when the\n" +
			"checkout had uncommitted changes), and the Go toolchain. Same as pysandboxes --version.\n",
		exits: []exitCode{{"0", "the version was printed"}, {"2", "a bad command line"}},
	}
}
