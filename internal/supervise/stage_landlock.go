package supervise

import (
	"encoding/json"
	"errors"
)

// LandlockConfig is the Config of a StageLandlock stage.
type LandlockConfig struct{}

func applyLandlock(raw json.RawMessage) error {
	return errors.New("landlock stage: not implemented yet")
}
