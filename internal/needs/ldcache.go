package needs

import (
	"bytes"
	"encoding/binary"
	"os"
)

// ldCache is the parsed /etc/ld.so.cache: library file name -> paths, in the
// cache's order.
type ldCache struct {
	libs map[string][]string
}

const (
	ldCacheOldMagic = "ld.so-1.7.0"
	ldCacheNewMagic = "glibc-ld.so.cache1.1"
	ldCacheNewHead  = 48 // magic[17] version[3] nlibs len_strings flags pad[3] ext_offset unused[3]
	ldCacheNewEntry = 24 // flags key value osversion hwcap(u64)
	ldCacheOldHead  = 16 // magic[11] pad nlibs
	ldCacheOldEntry = 12 // flags key value
)

// parseLdCache reads the loader cache in the new format ("glibc-ld.so.cache1.1"),
// alone or after an old-format ("ld.so-1.7.0") section. It returns nil for
// anything else.
func parseLdCache(b []byte) *ldCache {
	start := 0
	if bytes.HasPrefix(b, []byte(ldCacheOldMagic)) {
		if len(b) < ldCacheOldHead {
			return nil
		}
		n := int(binary.LittleEndian.Uint32(b[12:16]))
		if n < 0 || n > len(b)/ldCacheOldEntry {
			return nil
		}
		start = (ldCacheOldHead + n*ldCacheOldEntry + 7) &^ 7
	}
	if start+ldCacheNewHead > len(b) || !bytes.HasPrefix(b[start:], []byte(ldCacheNewMagic)) {
		return nil
	}
	h := b[start:]
	// The new format is written in the machine's byte order.
	order := binary.ByteOrder(binary.LittleEndian)
	nlibs := order.Uint32(h[20:24])
	if uint64(nlibs)*ldCacheNewEntry > uint64(len(h)) {
		order = binary.BigEndian
		nlibs = order.Uint32(h[20:24])
		if uint64(nlibs)*ldCacheNewEntry > uint64(len(h)) {
			return nil
		}
	}
	str := func(off uint32) (string, bool) {
		if uint64(off) >= uint64(len(h)) {
			return "", false
		}
		s := h[off:]
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			return "", false
		}
		return string(s[:i]), true
	}
	c := &ldCache{libs: map[string][]string{}}
	for i := uint32(0); i < nlibs; i++ {
		e := h[ldCacheNewHead+int(i)*ldCacheNewEntry:]
		if len(e) < ldCacheNewEntry {
			break
		}
		key, ok1 := str(order.Uint32(e[4:8]))
		value, ok2 := str(order.Uint32(e[8:12]))
		if ok1 && ok2 && key != "" && value != "" {
			c.libs[key] = append(c.libs[key], value)
		}
	}
	return c
}

// ldCacheLookup returns the paths the loader cache lists for a library name. The
// parsed cache is kept until the file changes.
func (r *Resolver) ldCacheLookup(name string) []string {
	key, err := keyOf(ldSoCache)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ldcache == nil || r.ldKey != key {
		b, err := os.ReadFile(ldSoCache)
		if err != nil {
			return nil
		}
		r.ldcache = parseLdCache(b)
		if r.ldcache == nil {
			r.ldcache = &ldCache{}
		}
		r.ldKey = key
	}
	return r.ldcache.libs[name]
}
