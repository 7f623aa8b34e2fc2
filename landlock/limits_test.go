package landlock_test

import (
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestResourceLimitsApply: the resource limits reach the confined program.
func TestResourceLimitsApply(t *testing.T) {
	sb := sandbox(t, nil, pysandboxes.WithLimits(pysandboxes.Limits{OpenFiles: 77, FileSize: 1 << 20}))
	out, err := providertest.Run(t, sb, providertest.Python(t), "-I", "-c", `import resource; print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE)[0]); print("fsize", resource.getrlimit(resource.RLIMIT_FSIZE)[0])`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "nofile 77") || !strings.Contains(out, "fsize 1048576") {
		t.Errorf("limits not applied:\n%s", out)
	}
}
