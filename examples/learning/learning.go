// Package learning shows how a Go package that calls Python through Call learns
// its rules from its own tests, and how the learned rules reach its profile only
// after a review (docs/learning-from-tests.md):
//
//	PYSANDBOXES_LEARN=/tmp/learned.rules go test ./examples/learning
//	pysandboxes diff --learned /tmp/learned.rules --config examples/learning/.py-sandboxes
//	pysandboxes diff --learned /tmp/learned.rules --config examples/learning/.py-sandboxes --approve
//	go test ./examples/learning
//
// NewSandbox loads the profile and, when learnFile is set, runs the calls in
// learning mode: nothing is refused, and what the Python side does is written to
// learnFile (never to the profile) when the sandbox closes.
package learning

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

// Dir returns the directory of this package: the worker's module wordcount.py
// lies there.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// NewSandbox makes the sandbox of the word counter under the rule file profile;
// a non-empty learnFile runs it in learning mode, learning into that file.
func NewSandbox(ctx context.Context, profile, learnFile string, opts ...pysandboxes.Option) (*pysandboxes.Sandbox, error) {
	pol, err := policy.Load(ctx, profile, &policy.Options{Learn: learnFile != ""})
	if err != nil {
		return nil, err
	}
	opts = append([]pysandboxes.Option{pysandboxes.WithCall(pysandboxes.CallConfig{Dir: Dir(), Workers: 1})}, opts...)
	if learnFile != "" {
		opts = append(opts, pysandboxes.WithLearning(learnFile))
	}
	return pysandboxes.New(ctx, pol, opts...)
}

// WordCount returns the three most frequent words of the file at path, counted
// by the sandboxed Python function wordcount.count.
func WordCount(ctx context.Context, sb *pysandboxes.Sandbox, path string) (map[string]int, error) {
	v, err := sb.Call(ctx, "wordcount:count", path)
	if err != nil {
		return nil, err
	}
	d, ok := v.(transport.Dict)
	if !ok {
		return nil, fmt.Errorf("wordcount: got %T", v)
	}
	out := make(map[string]int, len(d))
	for _, p := range d {
		k, ok1 := p.Key.(string)
		n, ok2 := p.Value.(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("wordcount: pair %T: %T", p.Key, p.Value)
		}
		out[k] = int(n)
	}
	return out, nil
}
