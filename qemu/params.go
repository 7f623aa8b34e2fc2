package qemu

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
)

// params are the qemu.* parameters of a policy.
type params struct {
	memory       int // MiB
	cpus         int
	kvm          string // auto, on, off
	kernel       string
	binary       string
	startTimeout time.Duration
	snapshot     bool
	// cgroup is "auto" (QEMU in a cgroup when the host lets us, a warning
	// otherwise) or "on" (refuse without); cgroupRule is the rule that said
	// "on", for the error.
	cgroup, cgroupRule string
}

func defaultParams() params {
	return params{memory: 512, cpus: 1, kvm: "auto", startTimeout: 120 * time.Second, snapshot: true, cgroup: "auto"}
}

// param is one known qemu.* parameter.
type param struct {
	help  string
	parse func(p *params, v string) error
}

// paramTable is every qemu.* parameter: any other is refused.
var paramTable = map[string]param{
	"memory": {"guest RAM: a size (512M, 1G; bare numbers are MiB), 64M to 64G (default 512M)", func(p *params, v string) error {
		n, err := parseMiB(v)
		if err != nil {
			return err
		}
		if n < 64 || n > 64<<10 {
			return fmt.Errorf("%d MiB is outside 64M..64G", n)
		}
		p.memory = n
		return nil
	}},
	"cpus": {"virtual CPUs, 1 to 16 (default 1)", func(p *params, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("%q is not a number from 1 to 16", v)
		}
		p.cpus = n
		return nil
	}},
	"kvm": {"auto (KVM when a probe guest boots with it), on (KVM or refuse), off (TCG emulation)", func(p *params, v string) error {
		switch strings.ToLower(v) {
		case "auto", "on", "off":
			p.kvm = strings.ToLower(v)
			return nil
		case "true", "yes", "1":
			p.kvm = "auto"
			return nil
		case "false", "no", "0":
			p.kvm = "off"
			return nil
		}
		return fmt.Errorf("%q is not auto, on or off", v)
	}},
	"kernel": {"the guest kernel: a vmlinuz-<release> or vmlinux-<release> whose /lib/modules/<release> is installed (default: the newest of /boot)", func(p *params, v string) error {
		if !strings.HasPrefix(v, "/") {
			return fmt.Errorf("%q is not an absolute path", v)
		}
		p.kernel = v
		return nil
	}},
	"binary": {"the QEMU binary (default qemu-system-x86_64 from the system's directories, then PATH)", func(p *params, v string) error {
		if !strings.HasPrefix(v, "/") {
			return fmt.Errorf("%q is not an absolute path", v)
		}
		p.binary = v
		return nil
	}},
	"start-timeout": {"how long a VM may take to start (a duration: 90s, 2m; default 120s)", func(p *params, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			if n, nerr := strconv.Atoi(v); nerr == nil {
				d, err = time.Duration(n)*time.Second, nil
			}
		}
		if err != nil || d <= 0 || d > time.Hour {
			return fmt.Errorf("%q is not a duration up to 1h", v)
		}
		p.startTimeout = d
		return nil
	}},
	"cgroup": {"auto (each QEMU in a cgroup bounding its own memory when the host lets us, a warning otherwise; default) or on (refuse to start without it)", func(p *params, v string) error {
		switch strings.ToLower(v) {
		case "auto":
			p.cgroup = "auto"
		case "on", "true", "yes", "1":
			p.cgroup = "on"
		default:
			return fmt.Errorf("%q is not auto or on", v)
		}
		return nil
	}},
	"snapshot": {"on (start from a saved VM state, made once; default) or off (boot every VM)", func(p *params, v string) error {
		switch strings.ToLower(v) {
		case "on", "true", "yes", "1":
			p.snapshot = true
		case "off", "false", "no", "0":
			p.snapshot = false
		default:
			return fmt.Errorf("%q is not on or off", v)
		}
		return nil
	}},
}

// aliases are upstream's spellings.
var aliases = map[string]string{"use_kvm": "kvm", "start_timeout": "start-timeout"}

// parseParams reads the policy's qemu.* lines.
func parseParams(pol driver.Policy) (params, error) {
	p := defaultParams()
	for _, pp := range pol.ProviderParams(Name) {
		name := pp.Name
		if a, ok := aliases[name]; ok {
			name = a
		}
		t, ok := paramTable[name]
		if !ok {
			return p, fmt.Errorf("%s: %s: unknown parameter qemu.%s (known: %s)", pp.Ref, pp.Raw, pp.Name, known())
		}
		if err := t.parse(&p, strings.TrimSpace(pp.Value)); err != nil {
			return p, fmt.Errorf("%s: %s: qemu.%s: %v (%s)", pp.Ref, pp.Raw, pp.Name, err, t.help)
		}
		if name == "cgroup" {
			p.cgroupRule = fmt.Sprintf("%s: %s", pp.Ref, pp.Raw)
		}
	}
	return p, nil
}

func known() string {
	var names []string
	for n := range paramTable {
		names = append(names, n)
	}
	sortStrings(names)
	return strings.Join(names, ", ")
}

// parseMiB reads a size in MiB (k, M, G, T suffixes; a bare number is MiB).
func parseMiB(v string) (int, error) {
	s := strings.TrimSpace(v)
	mult := 1.0
	if s != "" {
		switch strings.ToUpper(s[len(s)-1:]) {
		case "K":
			mult, s = 1.0/1024, s[:len(s)-1]
		case "M":
			s = s[:len(s)-1]
		case "G":
			mult, s = 1024, s[:len(s)-1]
		case "T":
			mult, s = 1024*1024, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size", v)
	}
	return int(n * mult), nil
}
