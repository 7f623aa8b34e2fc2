package pysandboxes_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks: every relative link of README.md and of the pages under docs/
// (and of the other Markdown files at the top: CHANGELOG.md, SECURITY.md,
// CONTRIBUTING.md) reaches a file or directory of the repository, and its
// #anchor, when it has one, a heading (or an explicit <a id>/<a name>) of the
// Markdown page it names, as GitHub renders them. Pages added later are checked
// too: the test walks docs/.
func TestDocLinks(t *testing.T) {
	pages := []string{}
	for _, top := range []string{"README.md", "CHANGELOG.md", "SECURITY.md", "CONTRIBUTING.md"} {
		if _, err := os.Stat(top); err == nil {
			pages = append(pages, top)
		}
	}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(b))
		anchors[page] = a
		return a, nil
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			target := l.target
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s:%d: link %q is absolute (GitHub resolves it from the site root): make it relative", page, l.line, target)
					continue
				}
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(dest); err != nil && pendingPages[filepath.ToSlash(dest)] {
					t.Logf("%s:%d: link %q: %s is not written yet (pendingPages)", page, l.line, target, dest)
					continue
				} else if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, l.line, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link parser is broken")
	}
}

// pendingPages are pages of the documentation index that are not in the tree
// yet (written at the same time as it, or generated): a link to one of them is
// accepted while the file is missing, and checked as any other once it exists.
// Remove an entry when its page lands.
var pendingPages = map[string]bool{}

type mdLink struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdownLinks returns the link targets of a Markdown page, outside code
// blocks and code spans.
func markdownLinks(md string) []mdLink {
	var out []mdLink
	fence := ""
	for i, l := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, mdLink{m[1], i + 1})
		}
		if m := refLink.FindStringSubmatch(l); m != nil {
			out = append(out, mdLink{m[1], i + 1})
		}
	}
	return out
}

// markdownAnchors returns the anchors GitHub gives the headings of a page (with
// -1, -2... for repeated ones) and the explicit <a id> or <a name> anchors.
func markdownAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, l := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimLeft(l, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		slug := headingSlug(strings.TrimSpace(text))
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

var mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// headingSlug is GitHub's anchor of a heading: the text (links reduced to their
// text), lower case, without punctuation but hyphens and underscores, spaces
// made hyphens.
func headingSlug(h string) string {
	h = mdLinkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestHeadingSlug: anchors as GitHub makes them.
func TestHeadingSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Quick start":                       "quick-start",
		"`net=` rules: DNS, pinning":        "net-rules-dns-pinning",
		"Python layer (pylayer/)":           "python-layer-pylayer",
		"What [Landlock](x.md) enforces":    "what-landlock-enforces",
		"eval-call, eval-attr and the rest": "eval-call-eval-attr-and-the-rest",
		"Providers × attacks":               "providers--attacks",
	} {
		if got := headingSlug(h); got != want {
			t.Errorf("headingSlug(%q) = %q, want %q", h, got, want)
		}
	}
	links := markdownLinks("see [a](b.md#c) and `[x](not.md)` and [d](e/ \"title\")\n```\n[f](g.md)\n```\n[ref]: h.md\n")
	var got []string
	for _, l := range links {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "b.md#c e/ h.md" {
		t.Errorf("markdownLinks = %q", got)
	}
}
