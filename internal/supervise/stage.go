package supervise

import "fmt"

// applyStage applies one confining stage to the calling thread.
func applyStage(st Stage) error {
	switch st.Kind {
	case "no-new-privs":
		return noNewPrivs()
	}
	return fmt.Errorf("unknown stage %q (host and helper binaries differ?)", st.Kind)
}
