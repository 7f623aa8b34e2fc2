package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Learning mode, the Go side: turning what a program was observed doing into rules
// merged into a rule file (rules-and-python-layer.md §3).
//
// The observer (the Python layer, or an OS-level tracer) records instead of refusing
// and hands an Observations to Learn at the end of the run. Learn generalises it into
// rule lines (see the Observations fields for each family), merges them into the
// marker blocks of the rule file (created from Template when missing), checks that
// the merged text loads, and writes it atomically after a backup of the previous
// version. Learn only ever adds rules; the two exceptions, documented below, comment
// out a rule that a new observation contradicts (a data-only result mode when an
// object result was seen, an expose-ro= of the very directory the program wrote in),
// and only in the file itself, never in an included profile.

// Observations is what a learning run saw the program do. The observer reports raw
// facts; Learn generalises them. Everything in it is treated as untrusted input: a
// value that cannot be written as a rule of its family (a line break, a '#', an
// invalid name...) is dropped, never written.
type Observations struct {
	// Env are the variable names read or required (not those the program set itself:
	// the observer filters them). Each becomes env=KEY=${KEY}, sorted, unless an env=
	// rule of the profile already covers it (exactly or by a pattern). A name that an
	// unenv= rule removes is not learned (a comment says so): learning never overrides
	// a removal written by hand. A name that ${KEY} cannot spell is dropped.
	Env []string
	// Files are the paths touched. Each is reduced to its directory (see FileAccess)
	// and becomes expose-ro=DIR, or expose-rw=DIR when any access under DIR wrote.
	Files []FileAccess
	// Net are the connects, binds and sends not already allowed. Each becomes
	// net=ALLOW|TCP|NETWORK|PORT|OUT (or UDP, IN).
	Net []NetAccess
	// DNS are the lookups of the run (getaddrinfo, gethostbyname...), names answered
	// from the hosts file included: they map the addresses of Net back to names.
	DNS []DNSAnswer
	// Imports are the top-level module names imported by application code (the
	// sandbox's own modules excluded by the observer). A dotted name is reduced to its
	// top-level module.
	Imports []string
	// API are the registered qualnames (see APIRegistry) called while not allowed.
	API []string
	// Eval are proposed eval-* rule lines, already formatted by the eval guard, and
	// optional comment lines ("# ...") to write with them. Any other line is dropped.
	Eval []string
	// Results is nil when no partial-mode call returned; else it says whether any
	// returned pickle needed object reconstruction.
	Results *ResultObservation
}

// FileAccess is one path the program touched.
type FileAccess struct {
	// Path is absolute, or relative to LearnOptions.Dir.
	Path string
	// Write reports an access that creates, writes, truncates, renames or deletes.
	Write bool
	// Dir reports that Path itself is a directory that was listed, searched or written
	// in (the rule then names Path itself); otherwise the rule names the directory
	// holding Path. An observer reports the creation of a directory as a write in its
	// parent (Dir set, Path the parent).
	Dir bool
	// Exec reports a program the program ran, or a file that program needs to
	// start (its ELF loader and libraries, the interpreter of a script): learned
	// even under LearnOptions.Skip, since a provider grants what a program needs
	// only for the program it starts, not for the ones that program runs.
	Exec bool
}

// NetAccess is one socket operation the program made.
type NetAccess struct {
	// Proto is TCP or UDP (a combined or zero value is dropped).
	Proto Proto
	// Dir is In (bind, listen) or Out (connect, sendto, sendmsg).
	Dir Direction
	// Host is the host name the program passed, if any ("" for an address).
	Host string
	// IP is the address the operation used: the local address for In (0.0.0.0 or ::
	// for a wildcard bind), the remote one for Out.
	IP netip.Addr
	// Port is the port of that address (0 for an ephemeral bind).
	Port uint16
}

// DNSAnswer is one name lookup and its answer.
type DNSAnswer struct {
	Name  string
	Addrs []netip.Addr
}

// ResultObservation tells what the partial-mode calls of the run returned.
type ResultObservation struct {
	// Objects reports that at least one returned pickle needed object reconstruction
	// (observed by opcode inspection, without unpickling).
	Objects bool
}

// LearnOptions tune Learn. The zero value uses the process's clock, working
// directory, home directory and environment.
type LearnOptions struct {
	// Now is the date of the "# Add rules (YYYY/MM/DD at HH:MM)" header, in its own
	// location. Zero means time.Now().
	Now time.Time
	// Dir is the current directory of the run: paths under it are written ./x, and the
	// rule file, includes and relative rules are resolved from it. "" means
	// os.Getwd().
	Dir string
	// Home is the home directory: paths under it are written ~/x. "" means
	// os.UserHomeDir().
	Home string
	// Env is the host environment of the run ("KEY=value"), for the ${VAR}
	// generalisations and for loading the merged file. Nil means os.Environ().
	Env []string
	// Skip are path prefixes never learned: the interpreter's own installation, the
	// pysandboxes layer, and anything the providers expose implicitly. A prefix covers
	// itself and everything below it (whole path components).
	Skip []string
	// Since is when the run started: in a temporary directory, a directory made
	// before it needs a rule of its own (see the generalisation notes). Zero means
	// every directory there existed before.
	Since time.Time
	// HostsFile is the hosts file ("" means /etc/hosts), read when the merged file
	// is loaded to check it (a learned address is never named from it).
	HostsFile string
	// Resolver resolves the host names of net= rules when the merged file is loaded to
	// check it. Nil means net.DefaultResolver.
	Resolver *net.Resolver
	// Providers are extra os-sandbox= names to accept when loading the file.
	Providers []string
	// Logger receives the final message (at INFO) and debug details of what was
	// dropped. Nil means slog.Default().
	Logger *slog.Logger
	// Create makes Learn write a new file only: when something exists at the
	// path, nothing is written and the error wraps fs.ErrExist. It is for a
	// learning that started because the rule file did not exist (python-sb
	// without one): a file that appeared meanwhile is never merged into.
	Create bool
}

// LearnResult is what Learn did.
type LearnResult struct {
	// Path is the absolute path of the rule file written (or left unchanged).
	Path string
	// Backup is the absolute path of the backup made of the previous file: "" for a
	// new file, and when nothing was added (the file is then not rewritten).
	Backup string
	// Added are the learned rule lines added, in file order (comments left out; for
	// a new file, the template's own lines are not listed).
	Added []string
	// Message is the final message for the user, also logged at INFO:
	//
	//	Write all learning rules in '<file>'.[ Remove the 'learn' parameter to use the
	//	sandboxes.][ The old version is here '<backup>'.] Check and update this file to
	//	validate the rules.
	//
	// or, when nothing was added to an existing file:
	//
	//	No new rule learned: '<file>' is unchanged.[ Remove the 'learn' ...]
	//
	// Paths are shown relative to Dir when under it, else as ~/x under Home, else
	// absolute. The 'learn' reminder is given when a line of the file starts with
	// "learn".
	Message string
}

// learnMarkers are the marker names of the sections, in the order of Template.
var learnMarkers = []string{
	"learning_guard_envs",
	"learning_guard_files",
	"learning_guard_socket",
	"learning_guard_import",
	"learning_guard_api",
	"learning_guard_eval",
	"learning_remote_result",
}

// Section indexes in learnMarkers.
const (
	secEnv = iota
	secFiles
	secNet
	secImport
	secAPI
	secEval
	secResult
	numSections
)

// learnHeaderFormat is the time layout of "# Add rules (2026/10/07 at 16:48)".
const learnHeaderFormat = "2006/01/02 at 15:04"

// maxBackups bounds the search for a free backup name.
const maxBackups = 10000

// Learn merges obs into the rule file at path (created from Template when missing)
// and returns what it did.
//
// The rule file is first loaded (as a learning request, so that learn=false in it
// or in a file it includes refuses with an error wrapping ErrLocked). The
// observations are generalised into rule lines (see Observations); a line already
// present verbatim in the file (surrounding spaces ignored) is not added again, nor
// is an access that the profile already allows, so a second run with the same
// observations adds nothing. Each non-empty family is inserted just before its
// closing marker ("# </learning_guard_envs>"...) as
//
//	# Add rules (YYYY/MM/DD at HH:MM)
//	<the lines>
//	<a blank line>
//
// and the families whose markers are missing are appended at the end of the file
// under one such header.
//
// The merged text must load without error (with the same options, as a learning
// request): otherwise nothing is written and the load error is returned (fail
// closed). When the file exists and nothing is to be added, it is neither rewritten
// nor backed up. Otherwise the previous file is first copied to "<path>.old", or the
// first free name of "<path>.old_1", "<path>.old_2"...; then the new text is written
// to "<path>.<pid>.tmp" in the same directory with the permissions of the previous
// file, synced, checked against the file again (a file changed meanwhile is an
// error) and renamed over path. A new file is linked into place, so that Learn never
// replaces a file that appeared meanwhile. Learn never follows a symbolic link: a
// link at path, at the temporary name or at a backup name is refused with an error,
// and nothing is written.
func Learn(path string, obs Observations, opts LearnOptions) (*LearnResult, error) {
	lo, err := resolveLearnOptions(opts)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("policy: learn: no rule file named")
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(lo.Dir, abs)
	}
	abs = filepath.Clean(abs)
	show := displayPath(abs, lo.Dir, lo.Home)

	old, perm, existed, err := readLearnTarget(abs)
	if err != nil {
		return nil, fmt.Errorf("policy: learn: %w", err)
	}
	if existed && lo.Create {
		return nil, fmt.Errorf("policy: learn: '%s' appeared while learning, nothing written: %w", show, fs.ErrExist)
	}
	base := old
	if !existed {
		base = []byte(Template())
	}
	ctx := context.Background()
	pol, err := Parse(ctx, abs, base, lo.loadOptions(slog.New(slog.DiscardHandler)))
	if err != nil {
		if existed {
			return nil, fmt.Errorf("policy: learn: cannot merge into '%s': %w", show, err)
		}
		return nil, fmt.Errorf("policy: learn: cannot create '%s': %w", show, err)
	}

	g := newLearnGen(pol, abs, string(base), lo)
	plan := g.generate(obs)
	merged, added := mergeLearned(string(base), plan, lo.Now)

	res := &LearnResult{Path: abs, Added: added}
	hint := ""
	if learnLineIn(merged) {
		hint = " Remove the 'learn' parameter to use the sandboxes."
	}
	if existed && merged == string(base) {
		res.Added = nil
		res.Message = fmt.Sprintf("No new rule learned: '%s' is unchanged.%s", show, hint)
		lo.Logger.Info(res.Message)
		return res, nil
	}

	// Fail closed: the merged text must load, and must not be locked.
	check, err := Parse(ctx, abs, []byte(merged), lo.loadOptions(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("policy: learn: the merged rules do not load, nothing written to '%s': %w", show, err)
	}
	if r := lockedLine(merged); r != "" {
		return nil, fmt.Errorf("policy: learn: '%s' holds '%s': %w", show, r, ErrLocked)
	}
	known := map[string]bool{}
	for _, w := range pol.Warnings() {
		known[w.Msg] = true
	}
	for _, w := range check.Warnings() {
		if !known[w.Msg] {
			lo.Logger.Warn(w.Msg, "rule", w.Ref.String())
		}
	}

	if !existed {
		perm = 0o644
	}
	backup, err := writeLearned(abs, []byte(merged), old, perm, existed)
	if err != nil {
		return nil, fmt.Errorf("policy: learn: %w", err)
	}
	res.Backup = backup
	msg := fmt.Sprintf("Write all learning rules in '%s'.%s", show, hint)
	if backup != "" {
		msg += fmt.Sprintf(" The old version is here '%s'.", displayPath(backup, lo.Dir, lo.Home))
	}
	res.Message = msg + " Check and update this file to validate the rules."
	lo.Logger.Info(res.Message)
	return res, nil
}

// resolveLearnOptions fills the defaults of opts.
func resolveLearnOptions(opts LearnOptions) (LearnOptions, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return opts, fmt.Errorf("policy: learn: current directory: %w", err)
		}
		opts.Dir = wd
	}
	if !filepath.IsAbs(opts.Dir) {
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return opts, fmt.Errorf("policy: learn: current directory: %w", err)
		}
		opts.Dir = abs
	}
	opts.Dir = filepath.Clean(opts.Dir)
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.Home != "" {
		opts.Home = filepath.Clean(opts.Home)
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return opts, nil
}

// loadOptions are the options of the loads Learn makes: a learning request, so that
// learn=false refuses.
func (lo LearnOptions) loadOptions(log *slog.Logger) *Options {
	return &Options{
		Learn:     true,
		Env:       lo.Env,
		Dir:       lo.Dir,
		Home:      lo.Home,
		HostsFile: lo.HostsFile,
		Resolver:  lo.Resolver,
		Providers: lo.Providers,
		Logger:    log,
	}
}

// readLearnTarget reads the rule file at path without following a symbolic link.
// existed is false when there is nothing at path.
func readLearnTarget(path string) (data []byte, perm fs.FileMode, existed bool, err error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(path)
		if dst, derr := os.Stat(dir); derr != nil || !dst.IsDir() {
			return nil, 0, false, fmt.Errorf("the directory '%s' of the rule file must exist", dir)
		}
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, 0, false, fmt.Errorf("refusing to write '%s': it is a symbolic link", path)
	}
	if !st.Mode().IsRegular() {
		return nil, 0, false, fmt.Errorf("refusing to write '%s': not a regular file", path)
	}
	data, st, err = readNoFollow(path)
	if err != nil {
		return nil, 0, false, err
	}
	return data, st.Mode().Perm(), true, nil
}

// readNoFollow reads a regular file, refusing a symbolic link at path (O_NOFOLLOW)
// and anything that is not a regular file, within maxFileSize.
func readNoFollow(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|learnNoFollow|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("refusing to read '%s': it is a symbolic link", path)
		}
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("refusing to read '%s': not a regular file", path)
	}
	// Where open cannot refuse a link itself, check that path still names the
	// file opened.
	if lst, err := os.Lstat(path); err != nil || !os.SameFile(lst, st) {
		return nil, nil, fmt.Errorf("refusing to read '%s': it changed while being opened", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFileSize {
		return nil, nil, fmt.Errorf("'%s' is larger than %d bytes", path, maxFileSize)
	}
	return data, st, nil
}

// learnLineIn reports whether a line of text starts with "learn" (a learn= rule,
// which keeps the profile in learning mode).
func learnLineIn(text string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "learn") {
			return true
		}
	}
	return false
}

// lockedLine returns the first learn=false rule of text, or "".
func lockedLine(text string) string {
	for l := range strings.SplitSeq(text, "\n") {
		s := stripComment(l)
		k, v, ok := strings.Cut(s, "=")
		if ok && k == "learn" && strings.EqualFold(strings.TrimSpace(v), "false") {
			return s
		}
	}
	return ""
}

// learnPlan is what generation produced: the blocks of each section, and the lines
// of the file to comment out (0-based index -> the comment lines replacing it).
type learnPlan struct {
	sections [numSections][]learnBlock
	edits    map[int][]string
}

// learnBlock is a group of lines: headers (comments) written above the entries when
// at least one entry is written; entries are rule lines or notes ("# ..."), each
// written unless the file already holds it verbatim.
type learnBlock struct {
	headers []string
	entries []string
}

var markerRE = regexp.MustCompile(`^#\s*<(/?)([a-z_]+)>\s*$`)

// mergeLearned inserts the planned sections into text and returns the new text and
// the rule lines added, in file order.
func mergeLearned(text string, plan learnPlan, now time.Time) (string, []string) {
	eol := "\n"
	if strings.Contains(text, "\r\n") {
		eol = "\r\n"
	}
	lines := strings.Split(text, "\n")
	trailing := false // text ends with a line break
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
		trailing = true
	}
	present := map[string]bool{}
	for _, l := range lines {
		if s := strings.TrimSpace(l); s != "" {
			present[s] = true
		}
	}
	// Keep only the entries to write, and the blocks that keep one.
	var sections [numSections][]string
	for i, blocks := range plan.sections {
		for _, b := range blocks {
			var keep []string
			for _, e := range b.entries {
				e = strings.TrimSpace(e)
				if e == "" || present[e] {
					continue
				}
				present[e] = true
				keep = append(keep, e)
			}
			if len(keep) > 0 {
				sections[i] = append(sections[i], b.headers...)
				sections[i] = append(sections[i], keep...)
			}
		}
	}
	header := "# Add rules (" + now.Format(learnHeaderFormat) + ")"
	closing := map[string]int{} // marker name -> index of its first closing line
	for i, l := range lines {
		if m := markerRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil && m[1] == "/" {
			if _, seen := closing[m[2]]; !seen {
				closing[m[2]] = i
			}
		}
	}
	insertAt := map[int][]string{}
	var tail []string
	for i, sec := range sections {
		if len(sec) == 0 {
			continue
		}
		if at, ok := closing[learnMarkers[i]]; ok {
			insertAt[at] = append(append([]string{header}, sec...), "")
		} else {
			tail = append(tail, sec...)
		}
	}
	changed := len(insertAt) > 0 || len(tail) > 0 || len(plan.edits) > 0
	if !changed {
		return text, nil
	}
	var out []string
	var added []string
	emit := func(ls []string, generated bool) {
		for _, l := range ls {
			out = append(out, l)
			if generated && l != "" && !strings.HasPrefix(l, "#") {
				added = append(added, l)
			}
		}
	}
	for i, l := range lines {
		if ins, ok := insertAt[i]; ok {
			emit(ins, true)
		}
		if rep, ok := plan.edits[i]; ok {
			emit(rep, false)
			continue
		}
		out = append(out, l)
	}
	if len(tail) > 0 {
		if len(out) > 0 && strings.TrimSpace(strings.TrimSuffix(out[len(out)-1], "\r")) != "" {
			out = append(out, "")
		}
		emit(append(append([]string{header}, tail...), ""), true)
		trailing = true
	}
	// Lines of the file keep their own line ending ("\r" stays on them); new lines
	// get the file's.
	var b strings.Builder
	for i, l := range out {
		b.WriteString(strings.TrimSuffix(l, "\r"))
		if i < len(out)-1 || trailing {
			if strings.HasSuffix(l, "\r") {
				b.WriteString("\r\n")
			} else {
				b.WriteString(eol)
			}
		}
	}
	return b.String(), added
}

// writeLearned writes data over path atomically (see Learn), after a backup of old
// when the file existed, and returns the backup's path.
func writeLearned(path string, data, old []byte, perm fs.FileMode, existed bool) (backup string, err error) {
	dir := filepath.Dir(path)
	tmp := path + "." + strconv.Itoa(os.Getpid()) + ".tmp"
	if err := refuseLink(tmp); err != nil {
		return "", err
	}
	if existed {
		backup, err = writeBackup(path, old, perm)
		if err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				_ = os.Remove(backup)
				backup = ""
			}
		}()
	}
	if err := writeExclusive(tmp, data, perm, existed); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if existed {
		// The file must still be the one merged: not replaced by a link, not edited.
		now, _, rerr := readNoFollow(path)
		if rerr != nil {
			return "", fmt.Errorf("'%s' changed while learning, nothing written: %w", path, rerr)
		}
		if !bytes.Equal(now, old) {
			return "", fmt.Errorf("'%s' changed while learning, nothing written", path)
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", err
		}
	} else {
		// Link, unlike rename, fails when something (a file, a link) appeared at path.
		if lerr := os.Link(tmp, path); lerr != nil {
			if errors.Is(lerr, fs.ErrExist) {
				return "", fmt.Errorf("'%s' appeared while learning, nothing written: %w", path, fs.ErrExist)
			}
			// A file system without hard links: check, then rename.
			if _, serr := os.Lstat(path); !errors.Is(serr, fs.ErrNotExist) {
				return "", fmt.Errorf("'%s' appeared while learning, nothing written: %w", path, fs.ErrExist)
			}
			if err := os.Rename(tmp, path); err != nil {
				return "", err
			}
		} else {
			_ = os.Remove(tmp)
		}
	}
	syncDir(dir)
	return backup, nil
}

// refuseLink returns an error when something exists at name as a symbolic link.
func refuseLink(name string) error {
	st, err := os.Lstat(name)
	if err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("refusing to write '%s': a symbolic link is planted there", name)
	}
	return nil
}

// writeBackup copies old to the first free name of path.old, path.old_1... A name
// held by a symbolic link is refused; an existing backup is never overwritten.
func writeBackup(path string, old []byte, perm fs.FileMode) (string, error) {
	for i := 0; i < maxBackups; i++ {
		name := path + ".old"
		if i > 0 {
			name += "_" + strconv.Itoa(i)
		}
		st, err := os.Lstat(name)
		if err == nil {
			if st.Mode()&fs.ModeSymlink != 0 {
				return "", fmt.Errorf("refusing to write the backup '%s': a symbolic link is planted there", name)
			}
			continue // an earlier backup: keep it
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		err = writeExclusive(name, old, perm, true)
		if errors.Is(err, fs.ErrExist) {
			if lerr := refuseLink(name); lerr != nil {
				return "", lerr
			}
			continue // created meanwhile
		}
		if err != nil {
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("no free backup name for '%s' (tried %d)", path, maxBackups)
}

// writeExclusive creates name (which must not exist: O_EXCL, and O_NOFOLLOW so that
// a planted link is never followed), writes data, sets perm (exactly when exact,
// else as filtered by the umask) and syncs it.
func writeExclusive(name string, data []byte, perm fs.FileMode, exact bool) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|learnNoFollow|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			if lerr := refuseLink(name); lerr != nil {
				return lerr
			}
			return fmt.Errorf("refusing to write '%s': %w", name, err)
		}
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = os.Remove(name)
		}
	}()
	if exact {
		if err := f.Chmod(perm); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	ok = true
	return nil
}

// syncDir flushes a directory entry change to disk (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
