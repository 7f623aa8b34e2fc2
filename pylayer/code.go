package pylayer

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/internal/diskcache"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/pyjson"
)

//go:embed py/*.py
var pyFiles embed.FS

// Boot is the loader given to the interpreter with -c. argv[1] is the channel's
// descriptor. It reads one frame holding the layer's modules (marshalled code
// objects, or their sources when no compiled form could be cached), runs the boot
// module and hands over to it. It leaves nothing behind: boot clears __main__
// before the program runs.
const Boot = `import sys,marshal as m,posix as p
def r(n):
 b=b''
 while len(b)<n:
  c=p.read(F,n-len(b))
  if not c:raise SystemExit('pysandboxes: the sandbox host closed the channel')
  b+=c
 return b
F=int(sys.argv[1]);h=r(5);M=m.loads(r(int.from_bytes(h[:4],'big')-1))
if h[4]==2:M={k:v if k=='evalguard' else compile(v,'<pysandboxes/'+k+'>','exec',dont_inherit=True) for k,v in M.items()}
g={'__name__':'pysandboxes._boot','__builtins__':__builtins__}
exec(M['boot'],g);g['main'](F,M,r)
`

// Frame kinds of the channel.
const (
	kindCode   = 1  // host -> child: marshalled code objects of the layer
	kindSource = 2  // host -> child: the layer's sources (no compiled form cached)
	kindConfig = 3  // host -> child: the configuration (marshal)
	kindCall   = 4  // host -> worker: one call (worker.go)
	kindHello  = 16 // child -> host: the guard is armed
	kindDenial = 17 // child -> host: one refusal (JSON)
	kindLearn  = 18 // child -> host: learning observations (JSON)
	kindFatal  = 19 // child -> host: the layer could not start (text)
	kindReady  = 20 // worker -> host: ready for calls (JSON)
	kindStdout = 21 // worker -> host: a call's output (id + text)
	kindStderr = 22 // worker -> host: a call's error output (id + text)
	kindResult = 23 // worker -> host: a call's result (id + pickle)
	kindExc    = 24 // worker -> host: a call's exception (id + JSON descriptor)
)

// moduleNames are the layer's Python modules, by file name without .py.
func moduleSources() (map[string]string, string) {
	ents, _ := fs.ReadDir(pyFiles, "py")
	out := map[string]string{}
	var names []string
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".py")
		b, _ := pyFiles.ReadFile("py/" + e.Name())
		out[name] = string(b)
		names = append(names, name)
	}
	// The JSON encoder the eval guard shares starts the guard (whose functions
	// bind it when they are made) and ends the wire module.
	out["guard"] = pyjson.Prepend(out["guard"])
	out["wire"] = pyjson.Append(out["wire"])
	// The eval guard travels with the layer, as a nested marshal blob (or its
	// source): boot decodes it only when the policy declares eval profiles.
	out["evalguard"] = evalguard.Source()
	names = append(names, "evalguard")
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n + "\x00" + out[n] + "\x00"))
	}
	return out, hex.EncodeToString(h.Sum(nil)[:12])
}

const compileScript = `import sys, marshal
src = marshal.loads(sys.stdin.buffer.read())
out = {k: compile(v, '<pysandboxes/' + k + '>', 'exec', dont_inherit=True, optimize=0) for k, v in src.items()}
out['evalguard'] = marshal.dumps(out['evalguard'])
sys.stdout.buffer.write(marshal.dumps(out))
`

type codeBlob struct {
	kind    byte
	payload []byte
}

// guardCode returns the frame that carries the layer's modules to in: marshalled
// code objects compiled once by an unconfined run of the same interpreter (cached
// in memory and in the user's cache directory, keyed by the interpreter's version
// and the sources' hash), or the sources themselves when that fails.
func guardCode(ctx context.Context, in *Interpreter) *codeBlob {
	in.code.Do(func() { in.codeBlob = makeGuardCode(ctx, in) })
	return in.codeBlob
}

func makeGuardCode(ctx context.Context, in *Interpreter) *codeBlob {
	srcs, hash := moduleSources()
	key := in.Path + "|" + in.Info.Magic + "|" + in.Info.VersionS + "|" + hash
	sum := sha256.Sum256([]byte(key))
	name := "guard-" + in.Info.CacheTag + "-" + hex.EncodeToString(sum[:12]) + ".marshal"
	dir, derr := diskcache.Dir()
	if derr == nil {
		if data, err := diskcache.Read(dir, name, 16<<20); err == nil && len(data) > 0 {
			return &codeBlob{kind: kindCode, payload: data}
		}
	}
	srcMap := pyDict{}
	for k, v := range srcs {
		srcMap[k] = v
	}
	srcBytes, err := marshalValue(srcMap)
	if err != nil {
		panic(err) // the embedded sources are plain text
	}
	fallback := &codeBlob{kind: kindSource, payload: srcBytes}
	if derr != nil {
		return fallback
	}
	// Confined (package hostprobe): the interpreter may be untrusted.
	out, err := hostprobe.Run(ctx, hostprobe.Request{Path: in.Path, Args: []string{in.Path, "-I", "-S", "-c", compileScript},
		Stdin: srcBytes, Timeout: 60 * time.Second, MaxOutput: 16 << 20})
	if err != nil || len(out) == 0 {
		return fallback
	}
	if diskcache.Write(dir, name, out) != nil {
		// Not cached on disk: send the sources, as promised, rather than compile
		// again at every start of another process.
		return fallback
	}
	return &codeBlob{kind: kindCode, payload: out}
}
