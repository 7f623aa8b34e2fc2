//go:build linux && cgo

package supervise

/*
#include "supervisor_linux.h"

static const char *pysb_get_marker(void) { return pysb_marker; }
static const char *pysb_get_version(void) { return pysb_version; }
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"unsafe"
)

// cSupervisor reports that the supervisor of this binary is the C one
// (supervisor_linux.c), which a constructor runs before the Go runtime starts.
const cSupervisor = true

// cConstants returns the constants of the C supervisor, for the test that checks
// they are the Go side's.
func cConstants() map[string]any {
	return map[string]any{
		"marker":      C.GoString(C.pysb_get_marker()),
		"version":     C.GoString(C.pysb_get_version()),
		"hostDied":    int(C.pysb_sig_host_died),
		"terminate":   int(C.pysb_sig_terminate),
		"maxSpec":     int(C.pysb_max_spec),
		"maxStages":   int(C.pysb_max_stages),
		"maxRlimits":  int(C.pysb_max_rlimits),
		"maxExtra":    int(C.pysb_max_extra),
		"maxBPFInsns": int(C.pysb_max_bpf_insns),
		"maxRecords":  int(C.pysb_max_records),
		"maxRootOps":  int(C.pysb_max_root_ops),
		"maxViewOps":  int(C.pysb_max_view_ops),
	}
}

// cParse parses a spec with the C supervisor's parser (for the tests that compare
// it with decodeWire): true (there is a C parser) and its error.
func cParse(b []byte) (bool, error) {
	buf := C.CBytes(append([]byte{0}, b...)) // never a nil pointer, even for an empty spec
	defer C.free(buf)
	var msg [1024]C.char
	if C.pysb_parse_check((*C.char)(unsafe.Add(buf, 1)), C.size_t(len(b)), &msg[0], C.size_t(len(msg))) == 0 {
		return true, nil
	}
	return true, errors.New(C.GoString(&msg[0]))
}
