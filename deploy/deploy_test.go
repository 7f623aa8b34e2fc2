// Package deploy holds the image (../Dockerfile) and the Kubernetes manifest
// of the pysandboxes MCP server, and the tests that check them without a
// container engine: the manifest decoded strictly into the fields of the
// Kubernetes API it uses (a typo is an unknown field), the settings a
// hardened deployment needs, and the server run here with the manifest's own
// command line (health endpoint, a call, SIGTERM).
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"
)

// The subset of the Kubernetes API (core/v1, apps/v1) the manifest uses, with
// the same field names: decoding with KnownFields refuses any other.
type (
	object struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Metadata   metadata `yaml:"metadata"`
		Data       map[string]string
		Spec       yaml.Node `yaml:"spec"`
	}
	metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	deploymentSpec struct {
		Replicas int32 `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata metadata `yaml:"metadata"`
			Spec     podSpec  `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		AutomountServiceAccountToken  *bool               `yaml:"automountServiceAccountToken"`
		EnableServiceLinks            *bool               `yaml:"enableServiceLinks"`
		TerminationGracePeriodSeconds int64               `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               *podSecurityContext `yaml:"securityContext"`
		Containers                    []container         `yaml:"containers"`
		Volumes                       []volume            `yaml:"volumes"`
	}
	seccompProfile struct {
		Type string `yaml:"type"`
	}
	podSecurityContext struct {
		RunAsNonRoot   *bool           `yaml:"runAsNonRoot"`
		RunAsUser      *int64          `yaml:"runAsUser"`
		RunAsGroup     *int64          `yaml:"runAsGroup"`
		SeccompProfile *seccompProfile `yaml:"seccompProfile"`
	}
	securityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Privileged               *bool `yaml:"privileged"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
		SeccompProfile *seccompProfile `yaml:"seccompProfile"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int32  `yaml:"containerPort"`
			Protocol      string `yaml:"protocol"`
		} `yaml:"ports"`
		Env []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		ReadinessProbe  *probe           `yaml:"readinessProbe"`
		LivenessProbe   *probe           `yaml:"livenessProbe"`
		Resources       resources        `yaml:"resources"`
		SecurityContext *securityContext `yaml:"securityContext"`
		VolumeMounts    []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int32 `yaml:"initialDelaySeconds"`
		PeriodSeconds       int32 `yaml:"periodSeconds"`
		FailureThreshold    int32 `yaml:"failureThreshold"`
	}
	resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	}
	volume struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode int32  `yaml:"defaultMode"`
		} `yaml:"secret"`
		EmptyDir *struct {
			SizeLimit string `yaml:"sizeLimit"`
		} `yaml:"emptyDir"`
	}
	serviceSpec struct {
		Type     string            `yaml:"type"`
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int32  `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
			Protocol   string `yaml:"protocol"`
		} `yaml:"ports"`
	}
)

const manifestPath = "kubernetes/pysandboxes-mcp.yaml"

// manifest decodes the manifest strictly: its objects, the Deployment's and
// the Service's specs.
func manifest(t *testing.T) (objs map[string]object, dep deploymentSpec, svc serviceSpec) {
	t.Helper()
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	objs = map[string]object{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", manifestPath, err)
		}
		if _, dup := objs[o.Kind]; dup {
			t.Fatalf("%s: two objects of kind %s", manifestPath, o.Kind)
		}
		objs[o.Kind] = o
	}
	strict := func(n yaml.Node, v any) {
		var buf bytes.Buffer
		if err := yaml.NewEncoder(&buf).Encode(&n); err != nil {
			t.Fatal(err)
		}
		d := yaml.NewDecoder(&buf)
		d.KnownFields(true)
		if err := d.Decode(v); err != nil {
			t.Fatalf("%s: %T: %v", manifestPath, v, err)
		}
	}
	want := map[string]string{"ConfigMap": "v1", "Deployment": "apps/v1", "Service": "v1"}
	for kind, api := range want {
		if o, ok := objs[kind]; !ok || o.APIVersion != api {
			t.Fatalf("%s: no %s of %s", manifestPath, kind, api)
		}
	}
	if len(objs) != len(want) {
		t.Errorf("%s: %d objects, want %d", manifestPath, len(objs), len(want))
	}
	strict(objs["Deployment"].Spec, &dep)
	strict(objs["Service"].Spec, &svc)
	return objs, dep, svc
}

// TestManifest: the Deployment runs non-root, without privilege or
// capability, under RuntimeDefault seccomp, with resource limits and a
// readiness probe on the health endpoint; the Service selects its pods and
// targets its port; the ConfigMap is the image's policy; the paths the
// command line names are the volumes' mounts.
func TestManifest(t *testing.T) {
	objs, dep, svc := manifest(t)
	pod := dep.Template.Spec
	for k, v := range dep.Selector.MatchLabels {
		if dep.Template.Metadata.Labels[k] != v {
			t.Errorf("the selector %s=%s does not select the pods", k, v)
		}
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser, seccompProfile RuntimeDefault", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pods mount a service account token: the code they run has no use for one")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	csc := c.SecurityContext
	if csc == nil || csc.Privileged == nil || *csc.Privileged || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		!slices.Equal(csc.Capabilities.Drop, []string{"ALL"}) || len(csc.Capabilities.Add) > 0 ||
		csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		(csc.SeccompProfile != nil && csc.SeccompProfile.Type != "RuntimeDefault") {
		t.Errorf("container securityContext %+v: want unprivileged, no escalation, every capability dropped, a read-only root", csc)
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Limits[r] == "" || c.Resources.Requests[r] == "" {
			t.Errorf("no %s request and limit: %+v", r, c.Resources)
		}
	}
	if len(c.Ports) != 1 {
		t.Fatalf("ports %+v, want one", c.Ports)
	}
	port := c.Ports[0]
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/healthz" || rp.HTTPGet.Port != port.Name {
		t.Errorf("readinessProbe %+v: want httpGet /healthz on the port %s", rp, port.Name)
	}
	if svc.Type != "ClusterIP" || len(svc.Ports) != 1 || svc.Ports[0].TargetPort != port.Name {
		t.Errorf("Service %+v: want ClusterIP, targeting the port %s", svc, port.Name)
	}
	for k, v := range svc.Selector {
		if dep.Template.Metadata.Labels[k] != v {
			t.Errorf("the Service selector %s=%s does not select the pods", k, v)
		}
	}
	if !slices.Equal(c.Command, []string{"/usr/local/bin/pysandboxes"}) || len(c.Args) == 0 || c.Args[0] != "mcp" {
		t.Fatalf("command %q args %q: want /usr/local/bin/pysandboxes mcp ...", c.Command, c.Args)
	}
	// The paths of the command line are where the volumes are mounted.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	vols := map[string]volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	cfg, tok := argOf(c.Args, "--config"), argOf(c.Args, "--token-file")
	if v := vols["policy"]; v.ConfigMap == nil || v.ConfigMap.Name != objs["ConfigMap"].Metadata.Name || mounts["policy"] != path.Dir(cfg) {
		t.Errorf("--config %s is not the ConfigMap's mount (%+v at %s)", cfg, v, mounts["policy"])
	}
	if _, ok := objs["ConfigMap"].Data[path.Base(cfg)]; !ok {
		t.Errorf("the ConfigMap has no key %s", path.Base(cfg))
	}
	if v := vols["token"]; v.Secret == nil || mounts["token"] != path.Dir(tok) {
		t.Errorf("--token-file %s is not the Secret's mount", tok)
	}
	if mounts["tmp"] != "/tmp" || vols["tmp"].EmptyDir == nil {
		t.Error("no writable /tmp (the root file system is read-only)")
	}
	if argOf(c.Args, "--os-sandbox") != "landlock" {
		t.Errorf("--os-sandbox %q: the image runs landlock, the one provider that needs no privilege", argOf(c.Args, "--os-sandbox"))
	}
	// The policy is the image's.
	image, err := os.ReadFile("py-sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	if objs["ConfigMap"].Data[path.Base(cfg)] != string(image) {
		t.Error("the ConfigMap's policy differs from deploy/py-sandboxes, the image's")
	}
}

func argOf(args []string, name string) string {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// TestDockerfile: multi-stage, the last stage runs as a numeric non-root
// user, nothing asks for privileges, and the entry point is the manifest's
// command with the same paths.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var entry string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "--privileged") || strings.Contains(line, "--cap-add") || strings.Contains(line, "seccomp=unconfined") {
			t.Errorf("the Dockerfile asks for privileges: %s", line)
		}
		switch f, rest, _ := strings.Cut(line, " "); f {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "ENTRYPOINT":
			entry = rest
		}
	}
	if len(froms) < 2 {
		t.Errorf("%d stages, want a build stage and a run stage", len(froms))
	}
	if len(users) == 0 || !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(users[len(users)-1]) {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot checks numbers)", users)
	}
	_, dep, _ := manifest(t)
	c := dep.Template.Spec.Containers[0]
	if uid := strings.Split(users[len(users)-1], ":")[0]; dep.Template.Spec.SecurityContext.RunAsUser == nil ||
		uid != strconv.FormatInt(*dep.Template.Spec.SecurityContext.RunAsUser, 10) {
		t.Errorf("USER %s is not the manifest's runAsUser", uid)
	}
	for _, a := range []string{"--config", "--token-file", "--os-sandbox", "--accept-unenforced"} {
		if !strings.Contains(entry, `"`+a+`", "`+argOf(c.Args, a)+`"`) {
			t.Errorf("ENTRYPOINT %s: %s is not the manifest's %s", entry, a, argOf(c.Args, a))
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestManifestCommandServes runs the server here with the manifest's own
// arguments (the policy and token files, and port 0, in place of the
// container's): the readiness probe's path answers 200, a call with the token
// is served, a request without it is refused, and SIGTERM stops the server
// within the pod's termination grace period, exit 0.
func TestManifestCommandServes(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	objs, dep, _ := manifest(t)
	pod := dep.Template.Spec
	c := pod.Containers[0]
	dir := t.TempDir()
	bin := filepath.Join(dir, "pysandboxes")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "github.com/pysandboxes/pysandboxes/cmd/pysandboxes")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building pysandboxes: %v", err)
	}
	if out, err := exec.Command(bin, "probe", "landlock").CombinedOutput(); err != nil {
		t.Skipf("landlock is not available here, the image's provider:\n%s", out)
	}
	cfg := filepath.Join(dir, "py-sandboxes")
	if err := os.WriteFile(cfg, []byte(objs["ConfigMap"].Data["py-sandboxes"]), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef0123456789abcdef"
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args)
	for i := range args {
		switch {
		case i > 0 && args[i-1] == "--config":
			args[i] = cfg
		case i > 0 && args[i-1] == "--token-file":
			args[i] = tok
		case i > 0 && args[i-1] == "--http":
			args[i] = "0.0.0.0:0"
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	re := regexp.MustCompile(`serving MCP on http://\S+:(\d+)/mcp`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://127.0.0.1:" + m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(base + c.ReadinessProbe.HTTPGet.Path)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readiness %s: %v %v", c.ReadinessProbe.HTTPGet.Path, resp, err)
	}
	resp.Body.Close()
	if resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v, want 401", resp, err)
	}
	t.Logf("ready")
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "deploy-test", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "eval_python", Arguments: map[string]any{"source": "max(xs) - min(xs)", "names": map[string]any{"xs": []int{4, 9, 1}}}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != `{"value":8}` {
		t.Fatalf("eval_python: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import statistics; print(statistics.mean([1, 2, 3, 4]))"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"stdout":"2.5\n"`) {
		t.Fatalf("run_python: %v %+v", err, res)
	}
	cs.Close()

	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	defer func() { t.Logf("stopped %v after SIGTERM", time.Since(t0)) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(time.Duration(pod.TerminationGracePeriodSeconds) * time.Second):
		t.Errorf("still running %ds after SIGTERM, the pod's grace period", pod.TerminationGracePeriodSeconds)
	}
}
