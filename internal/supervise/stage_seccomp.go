package supervise

import (
	"encoding/json"
	"errors"
)

// SeccompConfig is the Config of a StageSeccomp stage.
type SeccompConfig struct {
	// BPF is the filter program: an array of struct sock_filter in native byte order.
	BPF []byte `json:"bpf"`
}

func applySeccomp(raw json.RawMessage) error {
	return errors.New("seccomp stage: not implemented yet")
}
