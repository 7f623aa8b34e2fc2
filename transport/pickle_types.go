package transport

// entryKind is a data type (or data function) of the closed table.
type entryKind uint8

const (
	entNone entryKind = iota // not a data type (Objects mode only)
	entComplex
	entSet
	entFrozenSet
	entByteArray
	entBytes
	entRange
	entGetattr
	entCodecsEncode
	entDate
	entTime
	entDateTime
	entTimeDelta
	entTimeZone
	entZoneInfo
	entZoneUnpickle
	entDecimal
	entFraction
	entUUID
	entPurePosixPath
	entPosixPath
	entPureWindowsPath
	entWindowsPath
	entIPv4Address
	entIPv6Address
	entIPv4Network
	entIPv6Network
	entIPv4Interface
	entIPv6Interface
	entOrderedDict
	entCounter
	entDeque
)

// dataTable is the closed list of names honoured in both modes: module + "\x00" + name.
var dataTable = map[string]entryKind{}

func init() {
	add := func(module string, k entryKind, names ...string) {
		for _, n := range names {
			dataTable[module+"\x00"+n] = k
		}
	}
	add("builtins", entComplex, "complex")
	add("builtins", entSet, "set")
	add("builtins", entFrozenSet, "frozenset")
	add("builtins", entByteArray, "bytearray")
	add("builtins", entBytes, "bytes")
	add("builtins", entRange, "range")
	add("builtins", entGetattr, "getattr")
	add("_codecs", entCodecsEncode, "encode")
	add("datetime", entDate, "date")
	add("datetime", entTime, "time")
	add("datetime", entDateTime, "datetime")
	add("datetime", entTimeDelta, "timedelta")
	add("datetime", entTimeZone, "timezone")
	add("zoneinfo", entZoneInfo, "ZoneInfo")
	add("zoneinfo", entZoneUnpickle, "ZoneInfo._unpickle")
	add("decimal", entDecimal, "Decimal")
	add("fractions", entFraction, "Fraction")
	add("uuid", entUUID, "UUID")
	for _, m := range []string{"pathlib", "pathlib._local"} {
		add(m, entPurePosixPath, "PurePosixPath")
		add(m, entPosixPath, "PosixPath")
		add(m, entPureWindowsPath, "PureWindowsPath")
		add(m, entWindowsPath, "WindowsPath")
	}
	add("ipaddress", entIPv4Address, "IPv4Address")
	add("ipaddress", entIPv6Address, "IPv6Address")
	add("ipaddress", entIPv4Network, "IPv4Network")
	add("ipaddress", entIPv6Network, "IPv6Network")
	add("ipaddress", entIPv4Interface, "IPv4Interface")
	add("ipaddress", entIPv6Interface, "IPv6Interface")
	add("collections", entOrderedDict, "OrderedDict")
	add("collections", entCounter, "Counter")
	add("collections", entDeque, "deque")
}
