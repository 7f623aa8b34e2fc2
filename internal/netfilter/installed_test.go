package netfilter

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInstalledMatchesString reads the table back from the kernel with the nft
// binary: every rule Setup installed (sets, ranges, masks, conntrack, NAT,
// rejects, comments) must read as String() prints it.
func TestInstalledMatchesString(t *testing.T) {
	needRoot(t)
	nsenter, err1 := exec.LookPath("nsenter")
	nft, err2 := exec.LookPath("nft")
	if err1 != nil || err2 != nil {
		t.Skip("needs nsenter and nft to read the table back")
	}
	sb, f, _ := setup(t,
		"net=DENY|tcp,udp|10.0.0.0/8|22,80-89,9000-|OUT",
		"net=ALLOW|tcp|srv2.test|443,8443|OUT",
		"net=ALLOW|udp|srv.test|5301|OUT",
		"net=DENY|*|2001:db8::/32|443,8443|OUT",
		"net=ALLOW|tcp|*|8080|OUT",
		"net=ALLOW|tcp|localhost|5432,6379|OUT",
		"net=DENY|tcp|*|6379|OUT",
		"net=ALLOW|tcp,udp|127.0.0.1|"+strconv.Itoa(freePort(t))+"|IN",
	)
	out, err := exec.Command(nsenter, "--net="+sb.ns.Net, nft, "list", "table", "inet", tableName).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	got := string(out)
	for name, num := range map[string]string{"mangle": "-150", "filter": "0", "srcnat": "100", "dstnat": "-100"} {
		got = strings.ReplaceAll(got, "priority "+name+";", "priority "+num+";")
	}
	want := f.String()
	want = want[strings.Index(want, "table inet"):]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("installed table (-String +kernel):\n%s", diff)
	}
}
