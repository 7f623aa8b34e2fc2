//go:build !unix

package policy

// learnNoFollow is 0 where open has no O_NOFOLLOW: Learn then relies on its Lstat
// checks and on O_EXCL, which never follows a link when it creates a file.
const learnNoFollow = 0
