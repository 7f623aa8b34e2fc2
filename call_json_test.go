package pysandboxes_test

import (
	"encoding/json"
	"testing"

	"github.com/pysandboxes/pysandboxes/transport"
)

// TestCallResultJSON: a result a real worker sends (every data type of the
// mapping, keys that are not strs) converts to JSON with transport.JSON, and
// json.Marshal of a structure holding it gives the same JSON.
func TestCallResultJSON(t *testing.T) {
	sb := callSandboxWith(t, "landlock", "", false)
	v := mustCall(t, sb, "callmod:make_values")
	const want = `[["none",null],["bool",true],["int",-7],["big",1267650600228229401496703205376],["float",1.5],` +
		`["complex",{"real":1.0,"imag":2.0}],["str","héllo"],["bytes","AP8="],["bytearray","YWI="],["list",[1,[2]]],` +
		`["tuple",[1,"a"]],["set",[3]],["frozenset",[4]],["date","2024-02-29"],["time","01:02:03.000004"],` +
		`["datetime","2024-01-02T03:04:05.000006+01:00"],["timedelta",-86395],["decimal","-1.50"],["fraction","3/4"],` +
		`["uuid","00000000-0000-0000-0000-000000000005"],["path","/a/b"],["ip4","1.2.3.4"],["ip6","::1"],` +
		`["net","10.0.0.0/8"],["iface","fe80::1/64"],["od",{"a":1}],["counter",{"a":2,"b":1}],["deque",[1,2]],` +
		`["range",{"start":1,"stop":10,"step":2}],[[1,2],"tuple key"],[[1],"frozenset key"]]`
	got, err := transport.JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("transport.JSON(result) =\n%s\nwant\n%s", got, want)
	}
	wrapped, err := json.Marshal(struct {
		Result any `json:"result"`
	}{v})
	if err != nil {
		t.Fatal(err)
	}
	if string(wrapped) != `{"result":`+want+`}` {
		t.Errorf("json.Marshal = %s", wrapped)
	}
	// A dict with str keys is an object, in order.
	got, err = transport.JSON(mustCall(t, sb, "callmod:echo", int64(1), "a"))
	if err != nil || string(got) != `[[1,"a"],{}]` {
		t.Errorf("echo as JSON = %s, %v", got, err)
	}
}
