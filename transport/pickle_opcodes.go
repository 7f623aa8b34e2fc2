package transport

import (
	"encoding/binary"
	"fmt"
)

// Opcodes (pickletools names).
const (
	opMARK            = '('
	opSTOP            = '.'
	opPOP             = '0'
	opPOP_MARK        = '1'
	opDUP             = '2'
	opFLOAT           = 'F'
	opINT             = 'I'
	opBININT          = 'J'
	opBININT1         = 'K'
	opLONG            = 'L'
	opBININT2         = 'M'
	opNONE            = 'N'
	opPERSID          = 'P'
	opBINPERSID       = 'Q'
	opREDUCE          = 'R'
	opSTRING          = 'S'
	opBINSTRING       = 'T'
	opSHORT_BINSTRING = 'U'
	opUNICODE         = 'V'
	opBINUNICODE      = 'X'
	opAPPEND          = 'a'
	opBUILD           = 'b'
	opGLOBAL          = 'c'
	opDICT            = 'd'
	opEMPTY_DICT      = '}'
	opAPPENDS         = 'e'
	opGET             = 'g'
	opBINGET          = 'h'
	opINST            = 'i'
	opLONG_BINGET     = 'j'
	opLIST            = 'l'
	opEMPTY_LIST      = ']'
	opOBJ             = 'o'
	opPUT             = 'p'
	opBINPUT          = 'q'
	opLONG_BINPUT     = 'r'
	opSETITEM         = 's'
	opTUPLE           = 't'
	opEMPTY_TUPLE     = ')'
	opSETITEMS        = 'u'
	opBINFLOAT        = 'G'
	opPROTO           = 0x80
	opNEWOBJ          = 0x81
	opEXT1            = 0x82
	opEXT2            = 0x83
	opEXT4            = 0x84
	opTUPLE1          = 0x85
	opTUPLE2          = 0x86
	opTUPLE3          = 0x87
	opNEWTRUE         = 0x88
	opNEWFALSE        = 0x89
	opLONG1           = 0x8a
	opLONG4           = 0x8b
	opBINBYTES        = 'B'
	opSHORT_BINBYTES  = 'C'
	opSHORT_BINUNI    = 0x8c
	opBINUNICODE8     = 0x8d
	opBINBYTES8       = 0x8e
	opEMPTY_SET       = 0x8f
	opADDITEMS        = 0x90
	opFROZENSET       = 0x91
	opNEWOBJ_EX       = 0x92
	opSTACK_GLOBAL    = 0x93
	opMEMOIZE         = 0x94
	opFRAME           = 0x95
	opBYTEARRAY8      = 0x96
	opNEXT_BUFFER     = 0x97
	opREADONLY_BUFFER = 0x98
)

// opInfo is what the decoder and its first pass know of an opcode before they run
// it: its name, and the argument that follows it in the stream.
type opInfo struct {
	name string
	// arg is the size in bytes of the opcode's fixed argument, for the opcodes
	// Unpickle accepts: a little-endian integer (BINFLOAT's is a big-endian
	// float), or the length of the data that follows when data is set. GLOBAL's
	// argument is two lines.
	arg  uint8
	data bool
}

var opTable = [256]opInfo{
	opMARK: {name: "MARK"}, opSTOP: {name: "STOP"}, opPOP: {name: "POP"}, opPOP_MARK: {name: "POP_MARK"},
	opPROTO: {name: "PROTO", arg: 1}, opFRAME: {name: "FRAME", arg: 8},
	opMEMOIZE: {name: "MEMOIZE"}, opBINPUT: {name: "BINPUT", arg: 1}, opLONG_BINPUT: {name: "LONG_BINPUT", arg: 4},
	opBINGET: {name: "BINGET", arg: 1}, opLONG_BINGET: {name: "LONG_BINGET", arg: 4},
	opNONE: {name: "NONE"}, opNEWTRUE: {name: "NEWTRUE"}, opNEWFALSE: {name: "NEWFALSE"},
	opBININT: {name: "BININT", arg: 4}, opBININT1: {name: "BININT1", arg: 1}, opBININT2: {name: "BININT2", arg: 2},
	opLONG1: {name: "LONG1", arg: 1, data: true}, opLONG4: {name: "LONG4", arg: 4, data: true},
	opBINFLOAT:     {name: "BINFLOAT", arg: 8},
	opSHORT_BINUNI: {name: "SHORT_BINUNICODE", arg: 1, data: true}, opBINUNICODE: {name: "BINUNICODE", arg: 4, data: true},
	opBINUNICODE8: {name: "BINUNICODE8", arg: 8, data: true}, opSHORT_BINBYTES: {name: "SHORT_BINBYTES", arg: 1, data: true},
	opBINBYTES: {name: "BINBYTES", arg: 4, data: true}, opBINBYTES8: {name: "BINBYTES8", arg: 8, data: true},
	opBYTEARRAY8: {name: "BYTEARRAY8", arg: 8, data: true},
	opEMPTY_LIST: {name: "EMPTY_LIST"}, opAPPEND: {name: "APPEND"}, opAPPENDS: {name: "APPENDS"},
	opEMPTY_DICT: {name: "EMPTY_DICT"}, opSETITEM: {name: "SETITEM"}, opSETITEMS: {name: "SETITEMS"},
	opEMPTY_TUPLE: {name: "EMPTY_TUPLE"}, opTUPLE1: {name: "TUPLE1"}, opTUPLE2: {name: "TUPLE2"},
	opTUPLE3: {name: "TUPLE3"}, opTUPLE: {name: "TUPLE"},
	opEMPTY_SET: {name: "EMPTY_SET"}, opADDITEMS: {name: "ADDITEMS"}, opFROZENSET: {name: "FROZENSET"},
	opSTACK_GLOBAL: {name: "STACK_GLOBAL"}, opGLOBAL: {name: "GLOBAL"}, opREDUCE: {name: "REDUCE"},
	opNEWOBJ: {name: "NEWOBJ"}, opNEWOBJ_EX: {name: "NEWOBJ_EX"}, opBUILD: {name: "BUILD"},
	// Refused.
	opDUP: {name: "DUP"}, opFLOAT: {name: "FLOAT"}, opINT: {name: "INT"}, opLONG: {name: "LONG"},
	opPERSID: {name: "PERSID"}, opBINPERSID: {name: "BINPERSID"}, opSTRING: {name: "STRING"},
	opBINSTRING: {name: "BINSTRING"}, opSHORT_BINSTRING: {name: "SHORT_BINSTRING"}, opUNICODE: {name: "UNICODE"},
	opDICT: {name: "DICT"}, opGET: {name: "GET"}, opINST: {name: "INST"}, opLIST: {name: "LIST"},
	opOBJ: {name: "OBJ"}, opPUT: {name: "PUT"}, opEXT1: {name: "EXT1"}, opEXT2: {name: "EXT2"}, opEXT4: {name: "EXT4"},
	opNEXT_BUFFER: {name: "NEXT_BUFFER"}, opREADONLY_BUFFER: {name: "READONLY_BUFFER"},
}

func opName(op byte) string {
	if n := opTable[op].name; n != "" {
		return n
	}
	return fmt.Sprintf("0x%02x", op)
}

// leUint reads a little-endian unsigned integer of 1, 2, 4 or 8 bytes.
func leUint(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}
