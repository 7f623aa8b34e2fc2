package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/examples/agents/internal/fakemodel"
	"github.com/pysandboxes/pysandboxes/examples/agents/pytool"
)

// TestAgent plays the sample against a fake Chat Completions server, the tool
// calls written as langchaingo's functions agent declares them (one string
// argument, __arg1): the model's first source is rejected, the program it runs
// next is refused, and its corrected source gives the value; each outcome
// reaches the model as the tool message answering its call, then the model's
// final answer comes back from the executor.
func TestAgent(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	arg1 := func(_, _, code string) string {
		b, _ := json.Marshal(map[string]string{"__arg1": code})
		return string(b)
	}
	srv := fakemodel.OpenAI(t, fakemodel.SandboxScript(arg1))
	var out bytes.Buffer
	answer, err := run(context.Background(), pytool.Config{
		Key:     fakemodel.Key,
		BaseURL: srv.URL + "/v1",
		Model:   "fake-model",
		Task:    pytool.DefaultTask,
		Tools:   pytool.Options{Python: "/usr/bin/python3"},
	}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("transcript:\n" + out.String())
	fakemodel.CheckSandboxScript(t, srv, answer, false)
}
