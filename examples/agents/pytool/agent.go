package pytool

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

// The conversation's opening, the same for every sample.
const (
	// System is the system prompt: what the tools are and how to act on a
	// rejection or a refusal.
	System = "You answer questions about data by writing Python that runs in a sandbox. " +
		"When a tool result says the code was rejected or refused, rewrite it within what is allowed; " +
		"name the rule you would need only if no rewrite can do it."
	// DefaultTask is the question asked when -task is not given.
	DefaultTask = "What is the total value of the orders (quantity times unit price)?"
)

// Config is what one run of a sample needs.
type Config struct {
	// Key, BaseURL and Model reach the model's API (BaseURL "" and Model ""
	// are the SDK's defaults).
	Key, BaseURL, Model string
	// Task is the user's question.
	Task string
	// Tools configures the sandboxed tools.
	Tools Options
	// MaxTurns bounds the model's answers (0 is 10).
	MaxTurns int
}

// Main is a sample's main function: it reads the API settings from the
// environment (PREFIX_API_KEY, PREFIX_BASE_URL, PREFIX_MODEL) and -task,
// -python, -provider from the command line, runs run, and exits with 2 when no
// key is set, 1 when the run fails.
func Main(name, prefix string, run func(context.Context, Config, io.Writer) (string, error)) {
	cfg := Config{
		Key:     os.Getenv(prefix + "_API_KEY"),
		BaseURL: os.Getenv(prefix + "_BASE_URL"),
		Model:   os.Getenv(prefix + "_MODEL"),
	}
	flag.StringVar(&cfg.Task, "task", DefaultTask, "the question for the model")
	flag.StringVar(&cfg.Tools.Python, "python", "", "the Python interpreter (default: python3, resolved)")
	flag.StringVar(&cfg.Tools.Provider, "provider", "", "the OS provider (default: auto)")
	flag.Parse()
	if cfg.Key == "" {
		fmt.Fprintf(os.Stderr, "%s: set %s_API_KEY (and %s_BASE_URL, %s_MODEL as needed)\n", name, prefix, prefix, prefix)
		os.Exit(2)
	}
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
